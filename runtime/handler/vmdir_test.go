package handler

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

func TestVMDirState(t *testing.T) {
	d := vmDir{path: t.TempDir()}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(d.path, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want LauncherState) {
		t.Helper()
		got, _, err := d.state()
		if err != nil || got != want {
			t.Fatalf("state = %v, %v; want %v", got, err, want)
		}
	}
	check(NotStarted)
	write(launcher.SpecFile, "{}")
	check(Running) // spec written, launcher not yet up
	// A live process that is not this directory's launcher (the test
	// itself, a recycled PID) does not count as the launcher.
	write(launcher.PIDFile, strconv.Itoa(os.Getpid()))
	check(Lost)
	write(launcher.ExitFile, `{"reason": "Shutdown", "succeeded": true, "at": "2026-11-29T00:00:00Z"}`)
	got, exit, err := d.state()
	if err != nil || got != Exited || exit == nil || !exit.Succeeded || exit.Reason != "Shutdown" {
		t.Fatalf("state = %v %+v %v; want Exited with the record", got, exit, err)
	}
	if err := d.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.path); !os.IsNotExist(err) {
		t.Errorf("directory not removed: %v", err)
	}
}

func TestUseImage(t *testing.T) {
	d := vmDir{path: t.TempDir()}
	if got := d.images(); len(got) != 0 {
		t.Fatalf("images of a new VM: %v", got)
	}
	for _, dir := range []string{"/cache/aaa", "/cache/bbb", "/cache/aaa"} {
		if err := d.useImage(&containerdisk.Image{Dir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.images(); !slices.Equal(got, []string{"aaa", "bbb"}) {
		t.Errorf("images = %v, want [aaa bbb]", got)
	}
}
