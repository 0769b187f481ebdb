package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tekvirt/tekvirt/images"
)

const mib = 1 << 20

// imageFixture writes a raw disk of virtual size `virtual` holding 64 MiB
// of random data and 64 MiB of compressible text, its qcow2 and an xz of
// the qcow2 (xz -1, multi-threaded: multi-block).
func imageFixture(t *testing.T, dir string, virtual int64) (raw, qcow2, qcow2xz string) {
	t.Helper()
	raw = filepath.Join(dir, "disk.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 64*mib)
	_, _ = rand.Read(random)
	if _, err := f.WriteAt(random, 16*mib); err != nil {
		t.Fatal(err)
	}
	line := "tekvirt disk image benchmark line of compressible text 0123456789\n"
	text := []byte(strings.Repeat(line, 64*mib/len(line)+1))[:64*mib]
	if _, err := f.WriteAt(text, virtual/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(virtual); err != nil {
		t.Fatal(err)
	}
	f.Close()
	qcow2 = filepath.Join(dir, "disk.qcow2")
	run(t, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow2)
	run(t, "xz", "-1", "-T2", "-k", qcow2)
	return raw, qcow2, qcow2 + ".xz"
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func timed(t *testing.T, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	return time.Since(start)
}

// TestImageDataPath measures, interleaved, median of 3: an HTTP import of a
// qcow2.xz from 127.0.0.1 against `curl | xz -d > f && qemu-img convert -O
// raw`; qcow2 -> raw in Go against qemu-img; and clone against cp
// --sparse=always. Ours fsyncs the disk before putting it in place, so each
// baseline ends with `sync FILE` too.
func TestImageDataPath(t *testing.T) {
	benchOnly(t)
	dir := t.TempDir()
	_, qcow2, qcow2xz := imageFixture(t, dir, 1<<30)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	url := "http://" + l.Addr().String() + "/" + filepath.Base(qcow2xz)
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ours, base, goConv, qemuConv, clone, cp []time.Duration
	for range 3 {
		ours = append(ours, timed(t, func() {
			src := &images.HTTPSource{URL: url}
			rc, size, err := src.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if _, err := images.Import(ctx, rc, size, images.Target{Path: filepath.Join(out, "ours.img")}, images.Options{}); err != nil {
				t.Fatal(err)
			}
		}))
		base = append(base, timed(t, func() {
			run(t, "sh", "-c", fmt.Sprintf("curl -sf %s | xz -d > %s/base.qcow2 && qemu-img convert -O raw %s/base.qcow2 %s/base.img && sync %s/base.img && rm %s/base.qcow2", url, out, out, out, out, out))
		}))
		goConv = append(goConv, timed(t, func() {
			src := images.FileSource{Path: qcow2}
			rc, size, err := src.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if _, err := images.Import(ctx, rc, size, images.Target{Path: filepath.Join(out, "go.img")}, images.Options{}); err != nil {
				t.Fatal(err)
			}
		}))
		qemuConv = append(qemuConv, timed(t, func() {
			run(t, "qemu-img", "convert", "-O", "raw", qcow2, filepath.Join(out, "qemu.img"))
			run(t, "sync", filepath.Join(out, "qemu.img"))
		}))
		clone = append(clone, timed(t, func() {
			if _, err := images.Clone(filepath.Join(out, "go.img"), filepath.Join(out, "clone.img")); err != nil {
				t.Fatal(err)
			}
		}))
		cp = append(cp, timed(t, func() {
			run(t, "cp", "--sparse=always", filepath.Join(out, "go.img"), filepath.Join(out, "cp.img"))
			run(t, "sync", filepath.Join(out, "cp.img"))
		}))
	}
	st, _ := os.Stat(qcow2xz)
	t.Logf("fixture: 1 GiB virtual, 128 MiB data (64 random, 64 text); qcow2.xz %d MiB", st.Size()/mib)
	t.Logf("HTTP import qcow2.xz -> raw: ours median %s of %v; curl|xz -d|qemu-img %s of %v; throughput ratio %.2f (target >= 0.9)",
		median(ours), ours, median(base), base, float64(median(base))/float64(median(ours)))
	t.Logf("qcow2 -> raw: Go %s of %v; qemu-img %s of %v; ratio %.2f", median(goConv), goConv, median(qemuConv), qemuConv, float64(median(qemuConv))/float64(median(goConv)))
	t.Logf("clone (%s here): %s of %v; cp --sparse=always %s of %v; ratio %.2f", cloneMethod(t, out), median(clone), clone, median(cp), cp, float64(median(cp))/float64(median(clone)))
}

func cloneMethod(t *testing.T, dir string) string {
	m, err := images.Clone(filepath.Join(dir, "go.img"), filepath.Join(dir, "method.img"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestImporterMemory imports a 1 GiB and a 4 GiB virtual qcow2.xz (the same
// 128 MiB of data) in a child process each and reports its peak RSS.
func TestImporterMemory(t *testing.T) {
	if src := os.Getenv("TEKVIRT_BENCH_IMPORT"); src != "" {
		importAndReport(t, src)
		return
	}
	benchOnly(t)
	peaks := map[int64]int64{}
	for _, gib := range []int64{1, 4} {
		dir := t.TempDir()
		_, _, xzFile := imageFixture(t, dir, gib<<30)
		cmd := exec.Command(os.Args[0], "-test.run=^TestImporterMemory$", "-test.v")
		cmd.Env = append(os.Environ(), "TEKVIRT_BENCH_IMPORT="+xzFile)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child import: %v\n%s", err, b)
		}
		i := strings.Index(string(b), "peak RSS KiB: ")
		if i < 0 {
			t.Fatalf("child printed no peak RSS:\n%s", b)
		}
		kib, _ := strconv.ParseInt(strings.Fields(string(b)[i+len("peak RSS KiB: "):])[0], 10, 64)
		peaks[gib] = kib
	}
	t.Logf("importer peak RSS: 1 GiB virtual %d MiB, 4 GiB virtual %d MiB (ratio %.2f; must not grow with size)",
		peaks[1]/1024, peaks[4]/1024, float64(peaks[4])/float64(peaks[1]))
}

func importAndReport(t *testing.T, src string) {
	ctx := context.Background()
	rc, size, err := images.FileSource{Path: src}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := images.Import(ctx, rc, size, images.Target{Path: filepath.Join(filepath.Dir(src), "imported.img")}, images.Options{}); err != nil {
		t.Fatal(err)
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Printf("peak RSS KiB: %s\n", strings.Fields(line)[1])
		}
	}
}
