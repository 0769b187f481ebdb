package clonedisk

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	data := append([]byte("boot"), make([]byte, 1<<20)...)
	if err := os.WriteFile(filepath.Join(src, DiskFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	method, err := Run(Params{SourceDir: src, TargetDir: dst, Size: "2Mi"}, &out)
	if err != nil || method == "" || !strings.Contains(out.String(), "cloned 1048580 bytes by "+method) {
		t.Fatalf("Run = %q, %v; %s", method, err, out.String())
	}
	got, err := os.ReadFile(filepath.Join(dst, DiskFile))
	if err != nil || len(got) != 2<<20 || !bytes.Equal(got[:len(data)], data) {
		t.Fatalf("clone: %d bytes, %v", len(got), err)
	}
	if _, err := Run(Params{SourceDir: src, TargetDir: dst, Size: "1Ki"}, &out); err == nil || !strings.Contains(err.Error(), "image larger than the target") {
		t.Errorf("too small: %v", err)
	}
	if _, err := Run(Params{SourceDir: dst + "/none", TargetDir: dst}, &out); err == nil || !strings.Contains(err.Error(), "source volume has no disk.img") {
		t.Errorf("no source: %v", err)
	}
}
