package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

const mib = 1 << 20

// rawFixture is 4 MiB: data in three places, zeros (holes to be) elsewhere.
func rawFixture() []byte {
	b := make([]byte, 4*mib)
	copy(b, "bootsector")
	for i := range 100_000 {
		b[mib+i] = byte(i*7 + 1)
	}
	copy(b[4*mib-16:], "the last bytes!!")
	return b
}

func qemuImg(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img not installed (apt-get install qemu-utils)")
	}
	return p
}

// convertFixture makes raw into format f with qemu-img.
func convertFixture(t *testing.T, raw []byte, f string, extra ...string) []byte {
	t.Helper()
	tool := qemuImg(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.raw"), filepath.Join(dir, "out."+f)
	if err := os.WriteFile(in, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"convert", "-f", "raw", "-O", f}, extra...)
	if b, err := exec.Command(tool, append(args, in, out)...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v %s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func xzip(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zst(t *testing.T, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(b, nil)
}

func tarOf(t *testing.T, name string, b []byte) []byte {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func importBytes(t *testing.T, src []byte, target Target, o Options) (*Result, error) {
	t.Helper()
	return Import(context.Background(), bytes.NewReader(src), int64(len(src)), target, o)
}

func checkDisk(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the %d expected", path, len(got), len(want))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used >= int64(len(want))/2 {
		t.Errorf("%s is not sparse: %d bytes allocated of %d", path, used, len(want))
	}
}

func TestImportFormats(t *testing.T) {
	raw := rawFixture()
	cases := map[string]struct {
		src    func(t *testing.T) []byte
		format Format
		layers string
	}{
		"raw":          {func(*testing.T) []byte { return raw }, Raw, ""},
		"raw.gz":       {func(t *testing.T) []byte { return gz(t, raw) }, Raw, "gz"},
		"raw.zst":      {func(t *testing.T) []byte { return zst(t, raw) }, Raw, "zst"},
		"raw.gz.tar":   {func(t *testing.T) []byte { return tarOf(t, "disk.img.gz", gz(t, raw)) }, Raw, "tar gz"},
		"qcow2":        {func(t *testing.T) []byte { return convertFixture(t, raw, "qcow2") }, QCOW2, ""},
		"qcow2 (zlib)": {func(t *testing.T) []byte { return convertFixture(t, raw, "qcow2", "-c") }, QCOW2, ""},
		"qcow2.xz":     {func(t *testing.T) []byte { return xzip(t, convertFixture(t, raw, "qcow2")) }, QCOW2, "xz"},
		"vmdk":         {func(t *testing.T) []byte { return convertFixture(t, raw, "vmdk") }, VMDK, ""},
		"vdi":          {func(t *testing.T) []byte { return convertFixture(t, raw, "vdi") }, VDI, ""},
		"vhdx":         {func(t *testing.T) []byte { return convertFixture(t, raw, "vhdx") }, VHDX, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := tc.src(t)
			disk := filepath.Join(t.TempDir(), "disk.img")
			sum := sha256.Sum256(src)
			var last Progress
			res, err := importBytes(t, src, Target{Path: disk}, Options{Checksum: "sha256:" + hex.EncodeToString(sum[:]), Progress: func(p Progress) { last = p }})
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != tc.format || strings.Join(formats(res.Compression), " ") != tc.layers || res.VirtualSize != int64(len(raw)) {
				t.Errorf("result %+v, want %s in %q, %d bytes", res, tc.format, tc.layers, len(raw))
			}
			if last.Phase != "done" || last.Done != int64(len(src)) || last.Percent() != 100 {
				t.Errorf("last progress %+v", last)
			}
			checkDisk(t, disk, raw)
			if left, _ := filepath.Glob(disk + ".*"); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func formats(fs []Format) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

// TestBadInputLeavesTheOldDisk: each failure names its cause, and a good
// disk already in place stays byte for byte.
func TestBadInputLeavesTheOldDisk(t *testing.T) {
	raw := rawFixture()
	old := []byte("a good disk from before")
	qcow := func(t *testing.T) []byte { return convertFixture(t, raw, "qcow2") }
	cases := map[string]struct {
		src     func(t *testing.T) []byte
		target  Target
		opts    Options
		want    error
		message string
	}{
		"wrong checksum": {src: func(*testing.T) []byte { return raw }, opts: Options{Checksum: "sha256:" + strings.Repeat("00", 32)},
			want: ErrChecksum, message: "sha256 of the image is"},
		"bad checksum syntax": {src: func(*testing.T) []byte { return raw }, opts: Options{Checksum: "crc32:1234"}, message: `"crc32" is not one of`},
		"truncated xz":        {src: func(t *testing.T) []byte { x := xzip(t, raw); return x[:len(x)/2] }, want: ErrInvalidImage, message: "xz stream truncated or corrupt"},
		"truncated gzip":      {src: func(t *testing.T) []byte { g := gz(t, raw); return g[:len(g)/2] }, want: ErrInvalidImage, message: "gz stream truncated or corrupt"},
		"corrupt qcow2 header": {src: func(*testing.T) []byte { b := append([]byte("QFI\xfb"), bytes.Repeat([]byte{0xff}, 4096)...); return b },
			want: ErrInvalidImage, message: "qcow2 header"},
		"qcow2 with backing file":       {src: func(t *testing.T) []byte { return backed(t, raw) }, want: ErrBackingFile, message: "base.raw"},
		"qcow2 with external data file": {src: func(t *testing.T) []byte { return withDataFile(t) }, want: ErrBackingFile, message: "external data file"},
		"raw larger than the volume":    {src: func(*testing.T) []byte { return raw }, target: Target{Capacity: mib}, want: ErrTooLarge, message: "exceeds the volume's 1048576"},
		"qcow2 larger than the size":    {src: qcow, target: Target{Size: 2 * mib}, want: ErrTooLarge, message: "exceeds the requested size 2097152"},
		// A 4 MiB qcow2 with 256 MiB of junk after it, gzipped to well under
		// 1 MiB: staging stops at the volume's size plus metadata room.
		"gzip bomb around a qcow2": {src: func(t *testing.T) []byte { return gz(t, append(qcow(t), make([]byte, 256*mib)...)) },
			target: Target{Capacity: 8 * mib}, want: ErrTooLarge, message: "the image file is larger than 10485760 bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.target.Path = filepath.Join(t.TempDir(), "disk.img")
			if err := os.WriteFile(tc.target.Path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := importBytes(t, tc.src(t), tc.target, tc.opts)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v; want %v with %q", err, tc.want, tc.message)
			}
			if got, _ := os.ReadFile(tc.target.Path); !bytes.Equal(got, old) {
				t.Fatalf("the old disk changed: %q", got)
			}
			if left, _ := filepath.Glob(tc.target.Path + ".*"); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// backed is a qcow2 overlay on a backing file.
func backed(t *testing.T, raw []byte) []byte {
	tool := qemuImg(t)
	dir := t.TempDir()
	base, over := filepath.Join(dir, "base.raw"), filepath.Join(dir, "over.qcow2")
	if err := os.WriteFile(base, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(tool, "create", "-f", "qcow2", "-F", "raw", "-b", base, over).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, b)
	}
	data, err := os.ReadFile(over)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// withDataFile is a qcow2 that keeps its data in another file.
func withDataFile(t *testing.T) []byte {
	tool := qemuImg(t)
	dir := t.TempDir()
	over := filepath.Join(dir, "over.qcow2")
	opts := "data_file=" + filepath.Join(dir, "data.raw") + ",data_file_raw=on"
	if b, err := exec.Command(tool, "create", "-q", "-f", "qcow2", "-o", opts, over, "1M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, b)
	}
	data, err := os.ReadFile(over)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSelfContained(t *testing.T) {
	raw := rawFixture()
	for name, tc := range map[string]struct {
		data    func(t *testing.T) []byte
		message string
	}{
		"raw":                  {data: func(*testing.T) []byte { return raw }},
		"empty":                {data: func(*testing.T) []byte { return nil }},
		"qcow2":                {data: func(t *testing.T) []byte { return convertFixture(t, raw, "qcow2") }},
		"backing file":         {data: func(t *testing.T) []byte { return backed(t, raw) }, message: "base.raw"},
		"external data file":   {data: withDataFile, message: "external data file"},
		"cut-off qcow2 header": {data: func(*testing.T) []byte { return []byte("QFI\xfb\x00\x00\x00\x03") }, message: "qcow2 header"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "disk")
			if err := os.WriteFile(path, tc.data(t), 0o644); err != nil {
				t.Fatal(err)
			}
			err := SelfContained(path)
			if tc.message == "" {
				if err != nil {
					t.Fatalf("SelfContained = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("SelfContained = %v, want an error with %q", err, tc.message)
			}
		})
	}
}

func TestImportGrowsToSize(t *testing.T) {
	raw := rawFixture()
	disk := filepath.Join(t.TempDir(), "disk.img")
	res, err := importBytes(t, gz(t, raw), Target{Path: disk, Size: 8 * mib, Capacity: 8 * mib}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.DiskSize != 8*mib {
		t.Errorf("disk size %d", res.DiskSize)
	}
	checkDisk(t, disk, append(raw, make([]byte, 4*mib)...))
}

func TestDetect(t *testing.T) {
	iso := make([]byte, HeaderSize)
	copy(iso[32769:], "CD001")
	for name, tc := range map[string]struct {
		head []byte
		want Format
	}{
		"gzip": {[]byte{0x1f, 0x8b, 8}, Gzip}, "xz": {[]byte("\xfd7zXZ\x00"), XZ}, "zstd": {[]byte{0x28, 0xb5, 0x2f, 0xfd}, Zstd},
		"qcow2": {[]byte("QFI\xfb\x00\x00\x00\x03"), QCOW2}, "vmdk": {[]byte("KDMV"), VMDK}, "vhd": {[]byte("conectix"), VHD},
		"vhdx": {[]byte("vhdxfile"), VHDX}, "iso": {iso, ISO}, "short": {[]byte{1}, Raw}, "empty": {nil, Raw},
	} {
		if got := Detect(tc.head); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
