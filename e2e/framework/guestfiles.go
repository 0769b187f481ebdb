package framework

import (
	"context"
	"path/filepath"
	"testing"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/runtime/cloudinit"
	"github.com/tekvirt/tekvirt/runtime/containerdisk"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// GuestFiles prepares in dir, as the node's handler does, the files of a
// VMI built by GuestVMI: a qcow2 overlay on the guest containerDisk in the
// node's image cache, its cloud-init seed, and the sockets' paths, for
// tests that start the domain themselves.
func GuestFiles(t testing.TB, vmi *v1.VirtualMachineInstance, dir string) domain.Options {
	t.Helper()
	ctx := context.Background()
	im, err := containerdisk.Cache{Dir: filepath.Join(cluster.NodeRoot, "images")}.Fetch(ctx, GuestImage)
	if err != nil {
		t.Fatal(err)
	}
	base, err := im.Disk()
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "disk-0.qcow2")
	if err := containerdisk.Overlay(ctx, base, overlay, ""); err != nil {
		t.Fatal(err)
	}
	seed, err := cloudinit.FromVolume(vmi, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	seedPath := filepath.Join(dir, "cloudinit-1.img")
	if err := seed.WriteImage(ctx, seedPath); err != nil {
		t.Fatal(err)
	}
	return domain.Options{
		Volumes:     map[string]domain.Volume{"containerdisk": {Path: overlay, Format: "qcow2"}, "cloudinitdisk": {Path: seedPath, Format: "raw"}},
		AgentSocket: filepath.Join(dir, "agent.sock"), SerialSocket: filepath.Join(dir, "serial.sock"), SerialLog: filepath.Join(dir, "serial.log"),
	}
}
