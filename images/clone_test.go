package images

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestClone(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "disk.img")
	raw := rawFixture()
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeSparse(f, bytesReader(raw)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dst := filepath.Join(dir, "clone.img")
	method, err := Clone(src, dst)
	if err != nil || (method != CloneReflink && method != CloneSparse) {
		t.Fatalf("Clone = %q, %v", method, err)
	}
	t.Logf("cloned by %s", method)
	checkDisk(t, dst, raw)
	if _, err := Clone(filepath.Join(dir, "absent"), dst); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing source: %v", err)
	}
	if left, _ := filepath.Glob(dst + ".*"); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
