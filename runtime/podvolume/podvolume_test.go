package podvolume

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// volume is a Pod volume with a tenant's links planted in it, and a file
// outside it the links point at.
func volume(t *testing.T) (Dir, string) {
	t.Helper()
	base := t.TempDir()
	outside := filepath.Join(base, "node-file")
	if err := os.WriteFile(outside, []byte(`{"secret":"of the node"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(base, "vol")
	if err := os.Mkdir(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	return Dir{Path: vol}, outside
}

func TestWriteReplacesPlantedLinks(t *testing.T) {
	d, outside := volume(t)
	for _, name := range []string{"launch.json", "disk-0.qcow2"} {
		if err := os.Symlink(outside, filepath.Join(d.Path, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteFile("launch.json", []byte("spec")); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "overlay")
	if err := os.WriteFile(src, []byte("qcow2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Install(src, "disk-0.qcow2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(outside); string(got) != `{"secret":"of the node"}` {
		t.Errorf("the node's file was written through a link: %q", got)
	}
	for name, want := range map[string]string{"launch.json": "spec", "disk-0.qcow2": "qcow2"} {
		fi, err := os.Lstat(filepath.Join(d.Path, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %v %v, want a regular file", name, fi, err)
		}
		if got, _ := os.ReadFile(filepath.Join(d.Path, name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	entries, _ := os.ReadDir(d.Path)
	if len(entries) != 2 {
		t.Errorf("entries %v: a temporary file was left", entries)
	}
}

func TestWriteGivesFilesToTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file away needs root, as the handler has")
	}
	d, _ := volume(t)
	d.Owner = &Owner{UID: 107, GID: 107}
	if err := d.WriteFile("disk-0.qcow2", []byte("overlay")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(filepath.Join(d.Path, "disk-0.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sys().(*syscall.Stat_t); s.Uid != 107 || s.Gid != 107 {
		t.Errorf("written as %d:%d, want 107:107", s.Uid, s.Gid)
	}
}

func TestReadFileRefusesLinksOutAndNonFiles(t *testing.T) {
	d, outside := volume(t)
	if err := os.Symlink(outside, filepath.Join(d.Path, "exit.json")); err != nil {
		t.Fatal(err)
	}
	if got, err := d.ReadFile("exit.json", 1<<20); err == nil {
		t.Errorf("read the node's file through a link: %q", got)
	}
	if err := os.Symlink("../vol/../../"+filepath.Base(filepath.Dir(outside)), filepath.Join(d.Path, "up")); err != nil {
		t.Fatal(err)
	}
	if got, err := d.ReadFile("up/node-file", 1<<20); err == nil {
		t.Errorf("read the node's file through a directory link: %q", got)
	}
	if err := os.Mkdir(filepath.Join(d.Path, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("dir", 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: err = %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(d.Path, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := d.ReadFile("fifo", 1<<20); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO planted in the volume blocked")
	}
	if err := os.WriteFile(filepath.Join(d.Path, "big"), make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadFile("big", 1024); err == nil {
		t.Error("a file over the limit was read")
	}
	if err := os.WriteFile(filepath.Join(d.Path, "ok"), []byte("fine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := d.ReadFile("ok", 1024); err != nil || string(got) != "fine" {
		t.Errorf("a regular file: %q, %v", got, err)
	}
}

func TestDialUnixOnlyReachesASocketInTheDirectory(t *testing.T) {
	d, _ := volume(t)
	// A service of the node, outside the volume; sun_path is short, so the
	// test keeps it under /tmp.
	nodeDir, err := os.MkdirTemp("", "pv")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(nodeDir) }()
	accepted := make(chan string, 4)
	serve := func(path, who string) {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- who
				c.Close()
			}
		}()
	}
	serve(filepath.Join(nodeDir, "node.sock"), "node")
	if err := os.Symlink(filepath.Join(nodeDir, "node.sock"), filepath.Join(d.Path, "launcher.sock")); err != nil {
		t.Fatal(err)
	}
	if c, err := d.DialUnix(context.Background(), "launcher.sock"); err == nil {
		c.Close()
		t.Fatal("dialled a node socket through a link")
	}
	if err := os.Remove(filepath.Join(d.Path, "launcher.sock")); err != nil {
		t.Fatal(err)
	}
	serve(filepath.Join(d.Path, "launcher.sock"), "launcher")
	c, err := d.DialUnix(context.Background(), "launcher.sock")
	if err != nil {
		t.Fatalf("dialling the launcher's socket: %v", err)
	}
	c.Close()
	if who := <-accepted; who != "launcher" {
		t.Errorf("reached %s", who)
	}
	select {
	case who := <-accepted:
		t.Errorf("also reached %s", who)
	default:
	}
	if err := os.WriteFile(filepath.Join(d.Path, "file.sock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DialUnix(context.Background(), "file.sock"); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a regular file: err = %v", err)
	}
}

func TestMountReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	d, outside := volume(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "disk.img"), []byte("image"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A planted link where an image goes is refused, not mounted through.
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(d.Path, "sha256-planted")); err != nil {
		t.Fatal(err)
	}
	if err := d.MountReadOnly(src, "sha256-planted"); err == nil {
		_ = d.Unmount("sha256-planted")
		t.Fatal("mounted onto a planted link")
	}
	if err := d.MountReadOnly(src, "sha256-a"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Unmount("sha256-a") })
	if err := d.MountReadOnly(src, "sha256-a"); err != nil {
		t.Fatalf("mounting again: %v", err)
	}
	if ok, err := d.Mounted("sha256-a"); err != nil || !ok {
		t.Fatalf("mounted = %v, %v", ok, err)
	}
	if got, err := os.ReadFile(filepath.Join(d.Path, "sha256-a", "disk.img")); err != nil || string(got) != "image" {
		t.Errorf("reading through the mount: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, "sha256-a", "disk.img"), []byte("changed"), 0o644); err == nil {
		t.Error("wrote the image through its mount")
	}
	if err := os.Remove(filepath.Join(d.Path, "sha256-a", "disk.img")); err == nil {
		t.Error("removed the image through its mount")
	}
	if err := d.Unmount("sha256-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(d.Path, "sha256-a")); !os.IsNotExist(err) {
		t.Errorf("mount point left: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "disk.img")); string(got) != "image" {
		t.Errorf("the image changed: %q", got)
	}
	if err := d.Unmount("sha256-a"); err != nil {
		t.Errorf("unmounting what is not there: %v", err)
	}
	if err := (Dir{Path: filepath.Join(d.Path, "gone")}).Unmount("sha256-a"); err != nil {
		t.Errorf("unmounting in a volume that is gone: %v", err)
	}
}
