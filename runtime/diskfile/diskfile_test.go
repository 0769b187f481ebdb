package diskfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestOpen(t *testing.T) {
	root := t.TempDir()
	vol := filepath.Join(root, "vol")
	other := filepath.Join(root, "other")
	for _, d := range []string{vol, other, filepath.Join(vol, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(vol, "disk.img"), "mine")
	write(filepath.Join(other, "disk.img"), "another tenant's")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("/etc/shadow", filepath.Join(vol, "shadow.img")))
	must(os.Symlink(filepath.Join(other, "disk.img"), filepath.Join(vol, "abs.img")))
	must(os.Symlink("../other/disk.img", filepath.Join(vol, "rel.img")))
	must(os.Symlink(other, filepath.Join(vol, "dirlink")))
	must(os.Link(filepath.Join(other, "disk.img"), filepath.Join(vol, "hard.img")))
	must(syscall.Mkfifo(filepath.Join(vol, "fifo.img"), 0o644))

	f, err := Open(vol, "disk.img", true)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4)
	if _, err := f.ReadAt(data, 0); err != nil || string(data) != "mine" {
		t.Fatalf("read %q, %v", data, err)
	}
	f.Close()

	for name, want := range map[string]string{
		"shadow.img":        "is a symbolic link",
		"abs.img":           "is a symbolic link",
		"rel.img":           "is a symbolic link",
		"dirlink/disk.img":  "is a symbolic link",
		"../other/disk.img": "leads out of its volume",
		"/etc/hostname":     "leads out of its volume",
		"hard.img":          "has 2 names",
		"fifo.img":          "not a regular file or a block device",
		"sub":               "not a regular file or a block device",
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Open(vol, name, false)
			if err == nil {
				f.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v, want ErrUnsafe with %q", err, want)
			}
		})
	}
	if _, err := Open(vol, "absent.img", false); err == nil || errors.Is(err, ErrUnsafe) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

func TestChown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root, as the handler has")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "disk.img"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir, "disk.img", true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 2 { // the second call finds it owned already
		if err := Chown(f, 107, 108); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(dir, "disk.img"))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 107 || s.Gid != 108 {
			t.Errorf("owner %d:%d, want 107:108", s.Uid, s.Gid)
		}
	}
}
