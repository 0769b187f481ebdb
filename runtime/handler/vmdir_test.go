package handler

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/launcher"
	"github.com/tekvirt/tekvirt/runtime/podvolume"
)

func TestVMDirState(t *testing.T) {
	vol := t.TempDir()
	d := vmDir{path: t.TempDir(), pod: &podVolumes{vm: podvolume.Dir{Path: vol}, images: podvolume.Dir{Path: t.TempDir()}}}
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
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
	write(vol, launcher.SpecFile, "{}") // what the tenant may write counts for nothing
	check(NotStarted)
	write(d.path, launcher.SpecFile, "{}")
	check(Running) // handed over, no end recorded
	write(vol, launcher.ExitFile, `{"reason": "Shutdown", "succeeded": true, "at": "2026-11-29T00:00:00Z"}`)
	got, exit, err := d.state()
	if err != nil || got != Exited || exit == nil || !exit.Succeeded || exit.Reason != "Shutdown" {
		t.Fatalf("state = %v %+v %v; want Exited with the record", got, exit, err)
	}
	// An exit record linked to a file of the node is not read.
	if err := os.Remove(filepath.Join(vol, launcher.ExitFile)); err != nil {
		t.Fatal(err)
	}
	write(d.path, "node-exit.json", `{"reason": "Planted", "at": "2026-11-29T00:00:00Z"}`)
	if err := os.Symlink(filepath.Join(d.path, "node-exit.json"), filepath.Join(vol, launcher.ExitFile)); err != nil {
		t.Fatal(err)
	}
	if _, exit, err := d.state(); err == nil || exit != nil {
		t.Errorf("state read the node's file through the Pod's link: %+v %v", exit, err)
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

// TestPublishCapabilities hands the node's QEMU capabilities files, and
// nothing else of their directory, to the launcher Pod.
func TestPublishCapabilities(t *testing.T) {
	caps := t.TempDir()
	for name, content := range map[string]string{"a.xml": "<qemuCaps/>", "notes.txt": "no", ".hidden.xml": "no"} {
		if err := os.WriteFile(filepath.Join(caps, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vol := t.TempDir()
	d := vmDir{path: t.TempDir(), pod: &podVolumes{vm: podvolume.Dir{Path: vol}, images: podvolume.Dir{Path: t.TempDir()}}}
	for _, tt := range []struct {
		dir  string
		want []string
	}{
		{"", nil},
		{filepath.Join(caps, "none"), nil},
		{caps, []string{"/var/run/tekvirt/vm/a.xml"}},
	} {
		got, err := (&Handler{QEMUCapabilitiesDir: tt.dir}).publishCapabilities(d)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("publishCapabilities from %q = %v, %v; want %v", tt.dir, got, err, tt.want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(vol, "a.xml")); err != nil || string(data) != "<qemuCaps/>" {
		t.Errorf("a.xml in the Pod's volume: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(vol, "notes.txt")); !os.IsNotExist(err) {
		t.Errorf("notes.txt published: %v", err)
	}
}

func TestPodRecordIsThePodsOnly(t *testing.T) {
	dir := t.TempDir()
	first := vmDir{path: dir, pod: &podVolumes{vm: podvolume.Dir{Path: t.TempDir()}}}
	if _, ok := readPodRecord[[]string](first, "prelude.json"); ok {
		t.Fatal("a record before any was written")
	}
	if err := writePodRecord(first, "prelude.json", []string{"/vm/caps.xml"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := readPodRecord[[]string](first, "prelude.json"); !ok || len(got) != 1 || got[0] != "/vm/caps.xml" {
		t.Errorf("the Pod's own record: %v %v", got, ok)
	}
	// The next launcher Pod of the same VMI (another target of a
	// migration) has other volumes: the step is done again there.
	next := vmDir{path: dir, pod: &podVolumes{vm: podvolume.Dir{Path: t.TempDir()}}}
	if got, ok := readPodRecord[[]string](next, "prelude.json"); ok {
		t.Errorf("another Pod read the first Pod's record: %v", got)
	}
}
