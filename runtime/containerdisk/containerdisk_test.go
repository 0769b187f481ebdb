package containerdisk

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
)

// push stores an image holding files at host/repo:latest and returns its reference.
func push(t *testing.T, host, repo string, files map[string][]byte) string {
	t.Helper()
	img, err := crane.Image(files)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/" + repo + ":latest"
	if err := crane.Push(img, ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	qcow := append([]byte("QFI\xfb"), make([]byte, 508)...)
	good := push(t, host, "guest", map[string][]byte{
		"disk/guest.qcow2": qcow, "boot/vmlinuz": []byte("kernel"), "etc/other": []byte("x"),
	})
	empty := push(t, host, "nodisk", map[string][]byte{"etc/hostname": []byte("x")})
	cache := Cache{Dir: t.TempDir()}
	ctx := context.Background()

	im, err := cache.Fetch(ctx, good, "/boot/vmlinuz")
	if err != nil {
		t.Fatal(err)
	}
	disk, err := im.Disk()
	if err != nil || filepath.Base(disk) != "guest.qcow2" {
		t.Fatalf("Disk() = %q, %v", disk, err)
	}
	if f, err := Format(disk); err != nil || f != "qcow2" {
		t.Fatalf("Format = %q, %v", f, err)
	}
	if b, err := os.ReadFile(im.Path("/boot/vmlinuz")); err != nil || string(b) != "kernel" {
		t.Fatalf("kernel = %q, %v", b, err)
	}
	if _, err := os.Stat(im.Path("/etc/other")); !os.IsNotExist(err) {
		t.Errorf("a file outside /disk/ and the asked paths was extracted: %v", err)
	}
	again, err := cache.Fetch(ctx, good)
	if err != nil || again.Dir != im.Dir {
		t.Fatalf("second fetch = %+v, %v; want the cached %s", again, err, im.Dir)
	}

	if _, err := cache.Fetch(ctx, host+"/missing:latest"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing image: err = %v, want ErrNotFound", err)
	}
	im, err = cache.Fetch(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := im.Disk(); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "/disk/") {
		t.Errorf("image without /disk/: err = %v", err)
	}
	if _, err := cache.Fetch(ctx, good, "/boot/missing"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "/boot/missing") {
		t.Errorf("missing kernel path: err = %v", err)
	}
	im, err = cache.Fetch(ctx, good, "/etc/other")
	if b, rerr := os.ReadFile(im.Path("/etc/other")); err != nil || rerr != nil || string(b) != "x" {
		t.Errorf("a path asked after the image was cached: %q, %v, %v", b, err, rerr)
	}
	if _, err := cache.Fetch(ctx, "UPPER/case::bad"); err == nil {
		t.Error("bad reference accepted")
	}
}

func TestOverlay(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (apt-get install qemu-utils)")
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	over := filepath.Join(dir, "overlay.qcow2")
	if err := Overlay(context.Background(), base, over, ""); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qemu-img", "info", over).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "backing file: "+base) || !strings.Contains(string(out), "backing file format: raw") {
		t.Fatalf("qemu-img info: %v\n%s", err, out)
	}
	// Seen by a launcher Pod at another path: the overlay names that one.
	inPod := "/var/lib/tekvirt/images/sha256-x/disk.img"
	if err := Overlay(context.Background(), base, over+"-pod", inPod); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("qemu-img", "info", "-U", over+"-pod").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "backing file: "+inPod) || !strings.Contains(string(out), "virtual size: 1 MiB") {
		t.Fatalf("qemu-img info of the Pod's overlay: %v\n%s", err, out)
	}
	if err := Overlay(context.Background(), filepath.Join(dir, "absent"), over+"2", ""); err == nil {
		t.Error("overlay on a missing base succeeded")
	}
	// A qcow2 in the image that names a host file as its backing file: the
	// overlay is refused before anything opens the chain, and none is made.
	shadow := filepath.Join(dir, "shadow.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", "/etc/shadow", shadow).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	err = Overlay(context.Background(), shadow, over+"3", "")
	if !errors.Is(err, ErrNotSelfContained) || !strings.Contains(err.Error(), `backing file "/etc/shadow"`) {
		t.Errorf("overlay on a base backed by /etc/shadow: %v", err)
	}
	if _, err := os.Stat(over + "3"); !os.IsNotExist(err) {
		t.Errorf("an overlay was made on it: %v", err)
	}
}
