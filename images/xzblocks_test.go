package images

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"testing"

	"github.com/ulikunitz/xz"
)

// xzCLI compresses data with the xz tool (multi-threaded xz writes the
// block sizes this reader needs; Go has no such writer).
func xzCLI(t *testing.T, data []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("xz", append([]string{"-c", "-1"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz %v: %v (xz-utils is required by these tests)", args, err)
	}
	return out
}

// mixed is compressible data with some noise, n bytes.
func mixed(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		switch (i / 4096) % 3 {
		case 0:
			for j := i; j < min(i+4096, n); j++ {
				b[j] = byte(r.IntN(256))
			}
		case 1:
			copy(b[i:], bytes.Repeat([]byte("tekvirt "), 512))
		}
	}
	return b
}

func decodeXZ(t *testing.T, xzData []byte, workers int) ([]byte, error) {
	t.Helper()
	p := bufio.NewReaderSize(bytes.NewReader(xzData), HeaderSize+4096)
	if !splittable(p) {
		t.Fatal("not splittable")
	}
	return io.ReadAll(newXZBlocksReader(p, workers))
}

func TestXZBlocksDecodesWhatXZWrote(t *testing.T) {
	data := mixed(5<<20 + 123)
	for _, check := range []string{"crc32", "crc64", "sha256", "none"} {
		x := xzCLI(t, data, "-T2", "--block-size=700KiB", "--check="+check)
		for _, workers := range []int{1, 2, 3} {
			got, err := decodeXZ(t, x, workers)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("check %s, %d workers: %d bytes, %v", check, workers, len(got), err)
			}
		}
	}
	// Concatenated streams with padding between them, as xz reads them.
	two := append(append(xzCLI(t, data[:1<<20], "-T2", "--block-size=300KiB"), 0, 0, 0, 0), xzCLI(t, data[1<<20:], "-T2", "--block-size=1MiB")...)
	if got, err := decodeXZ(t, two, 2); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("two streams: %d bytes, %v", len(got), err)
	}
	// Blocks above the memory bound are decoded streaming.
	old := xzMaxBuffered
	xzMaxBuffered = 512 << 10
	defer func() { xzMaxBuffered = old }()
	if got, err := decodeXZ(t, xzCLI(t, data, "-T2", "--block-size=1MiB"), 2); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("large blocks: %d bytes, %v", len(got), err)
	}
}

func TestXZBlocksRejectsDamage(t *testing.T) {
	data := mixed(3 << 20)
	x := xzCLI(t, data, "-T2", "--block-size=512KiB")
	flipped := bytes.Clone(x)
	flipped[len(x)/2] ^= 0x40
	for name, in := range map[string][]byte{"truncated": x[:len(x)*2/3], "no footer": x[:len(x)-6], "flipped byte": flipped} {
		if _, err := decodeXZ(t, in, 2); err == nil {
			t.Errorf("%s: decoded without error", name)
		} else if !errors.Is(err, errXZCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// Single-threaded xz writes no block sizes: not splittable.
	if splittable(bufio.NewReaderSize(bytes.NewReader(xzCLI(t, data, "-T1")), HeaderSize+4096)) {
		t.Error("a stream without block sizes is taken as splittable")
	}
}

func TestImportOfMultiBlockXZ(t *testing.T) {
	raw := rawFixture()
	x := xzCLI(t, raw, "-T2", "--block-size=256KiB")
	disk := t.TempDir() + "/disk.img"
	res, err := Import(t.Context(), bytes.NewReader(x), int64(len(x)), Target{Path: disk}, Options{})
	if err != nil || res.Format != Raw || len(res.Compression) != 1 || res.Compression[0] != XZ {
		t.Fatalf("import = %+v, %v", res, err)
	}
	checkDisk(t, disk, raw)
}

// BenchmarkXZDecode compares the block-parallel decoder with ulikunitz/xz
// alone on the same multi-block stream (report the ratio of the two).
func BenchmarkXZDecode(b *testing.B) {
	data := mixed(48 << 20)
	cmd := exec.Command("xz", "-c", "-1", "-T2")
	cmd.Stdin = bytes.NewReader(data)
	x, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		open func() io.Reader
	}{
		{"sequential", func() io.Reader {
			r, err := xz.NewReader(bytes.NewReader(x))
			if err != nil {
				b.Fatal(err)
			}
			return r
		}},
		{"blocks", func() io.Reader {
			return newXZBlocksReader(bufio.NewReaderSize(bytes.NewReader(x), HeaderSize+4096), runtime.NumCPU())
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if n, err := io.Copy(io.Discard, tc.open()); err != nil || n != int64(len(data)) {
					b.Fatal(n, err)
				}
			}
		})
	}
}
