package result

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	if err := Write(map[string]string{"a": "1", "b": ""}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "1", "b": ""} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Fatalf("result %s = %q, %v; want %q", name, got, err, want)
		}
	}
	t.Setenv(DirEnv, filepath.Join(dir, "missing"))
	if err := Write(map[string]string{"x": "1"}); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

func TestWriteError(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(DirEnv, dir)
	WriteError(errors.New("importing x: checksum mismatch"))
	if got, err := os.ReadFile(filepath.Join(dir, Error)); err != nil || string(got) != "importing x: checksum mismatch" {
		t.Fatalf("error result = %q, %v", got, err)
	}
	t.Setenv(DirEnv, filepath.Join(dir, "absent"))
	WriteError(errors.New("outside Tekton"))
	if _, err := os.Stat(filepath.Join(dir, "absent")); !os.IsNotExist(err) {
		t.Errorf("a results directory was made outside Tekton: %v", err)
	}
}
