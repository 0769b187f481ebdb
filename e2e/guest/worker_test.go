package guest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestWorkerFlavor(t *testing.T) {
	dir := t.TempDir()
	kubelet, pause := filepath.Join(dir, "kubelet"), filepath.Join(dir, "pause.tar")
	for _, f := range []string{kubelet, pause} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := Worker(kubelet, pause)
	for _, p := range []string{"containerd", "runc", "containernetworking-plugins", "qemu-guest-agent"} {
		if !slices.Contains(w.Packages, p) {
			t.Errorf("worker lacks package %s", p)
		}
	}
	for _, m := range []string{"bridge", "veth", "virtio_net"} {
		if !slices.Contains(w.Modules, m) {
			t.Errorf("worker lacks module %s", m)
		}
	}
	if len(Test.Packages) != 4 || slices.Contains(Test.Modules, "bridge") {
		t.Error("building the worker changed the test guest")
	}
	if w.Static["usr/bin/kubelet"].Source != kubelet || !bytes.Contains(w.Init, []byte("--bootstrap-kubeconfig")) {
		t.Error("the worker does not start the kubelet given")
	}
	a, err := w.key("linux-image-6.1.0-1-amd64")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Test.key("linux-image-6.1.0-1-amd64"); bytes.Equal(a, b) {
		t.Error("worker and test guest share a cache key")
	}
	// A relinked but identical kubelet keeps the worker; a new one does not.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(kubelet, later, later); err != nil {
		t.Fatal(err)
	}
	if b, _ := w.key("linux-image-6.1.0-1-amd64"); !bytes.Equal(a, b) {
		t.Error("touching the kubelet changed the worker's cache key")
	}
	if err := os.WriteFile(kubelet, []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := w.key("linux-image-6.1.0-1-amd64"); bytes.Equal(a, b) {
		t.Error("a new kubelet kept the worker's cache key")
	}
}

func TestDiskSize(t *testing.T) {
	for payload, want := range map[int64]int64{10 << 20: 64, 87 << 20: 103, 200 << 20: 228} {
		if got := diskSize(payload); got != want {
			t.Errorf("diskSize(%d MiB) = %d MiB, want %d", payload>>20, got, want)
		}
	}
}
