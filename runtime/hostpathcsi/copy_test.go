package hostpathcsi

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCopyTreeKeepsLinksAsLinks copies a volume with a file, a
// subdirectory and links the tenant planted (to a file outside, to one
// inside): each link is copied as a link, the file outside never read.
func TestCopyTreeKeepsLinksAsLinks(t *testing.T) {
	dir := t.TempDir()
	src, dst, outside := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "secret")
	for _, d := range []string{filepath.Join(src, "sub"), dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(outside, []byte("the node's"), 0o600))
	must(os.WriteFile(filepath.Join(src, "sub", "disk.img"), []byte("guest data"), 0o640))
	must(os.Symlink(outside, filepath.Join(src, "escape")))
	must(os.Symlink("sub/disk.img", filepath.Join(src, "inside")))
	// A sparse file keeps its hole.
	f, err := os.Create(filepath.Join(src, "sparse"))
	must(err)
	must(f.Truncate(64 << 20))
	_, err = f.WriteAt([]byte("end"), 64<<20-3)
	must(err)
	must(f.Close())

	_, size, err := copyTree(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len("guest data") + 64<<20); size != want {
		t.Errorf("size %d, want %d", size, want)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "disk.img")); err != nil || string(b) != "guest data" {
		t.Errorf("disk.img: %q, %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "sub", "disk.img")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("disk.img mode: %v, %v", st, err)
	}
	for name, target := range map[string]string{"escape": outside, "inside": "sub/disk.img"} {
		got, err := os.Readlink(filepath.Join(dst, name))
		if err != nil || got != target {
			t.Errorf("%s: a link to %q, %v; want a link to %q", name, got, err, target)
		}
	}
	st, err := os.Stat(filepath.Join(dst, "sparse"))
	must(err)
	if st.Size() != 64<<20 {
		t.Errorf("sparse file size %d", st.Size())
	}
	if alloc := st.Sys().(*syscall.Stat_t).Blocks * 512; alloc > 1<<20 {
		t.Errorf("the sparse file's copy allocates %d bytes: its hole was filled", alloc)
	}
}
