package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The testbed's CNI files: Debian's plugins linked beside the add-ons',
// a foreign network configuration refused, and a wipe that takes only
// what the testbed and the add-ons wrote.
func TestCNIDirectories(t *testing.T) {
	root := t.TempDir()
	plugins, conf, bin := filepath.Join(root, "usr-lib-cni"), filepath.Join(root, "net.d"), filepath.Join(root, "bin")
	for _, dir := range []string{plugins, conf, bin} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) {
		if err := os.WriteFile(path, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"bridge", "loopback", "host-local"} {
		write(filepath.Join(plugins, p))
	}
	write(filepath.Join(bin, "bridge")) // an add-on's, installed first
	write(filepath.Join(bin, "other"))  // someone else's
	if err := linkPlugins(plugins, bin); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(bin, "loopback")); err != nil || target != filepath.Join(plugins, "loopback") {
		t.Errorf("loopback: %q %v", target, err)
	}
	if _, err := os.Readlink(filepath.Join(bin, "bridge")); err == nil {
		t.Error("the add-on's bridge plugin was replaced by a link")
	}

	for _, f := range []string{cniConfigFile, "00-multus.conflist"} {
		write(filepath.Join(conf, f))
	}
	if err := checkCNIConfDir(conf); err != nil {
		t.Errorf("the testbed's and Multus's configurations: %v", err)
	}
	write(filepath.Join(conf, "05-other.conf"))
	if err := checkCNIConfDir(conf); err == nil || !strings.Contains(err.Error(), "05-other.conf") {
		t.Errorf("a foreign configuration: %v, want refused naming it", err)
	}

	if err := wipeCNIDirs(conf, bin, plugins); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string][]string{conf: {"05-other.conf"}, bin: {"other"}} {
		entries, _ := os.ReadDir(dir)
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s after the wipe: %v, want %v", dir, got, want)
		}
	}
}
