package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tekvirt/tekvirt/e2e/guest"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// GuestImage is the containerDisk of the guest tekvirt builds: the bootable
// disk under /disk/, and its kernel and initrd under /boot/ for kernel boot.
const GuestImage = RegistryAddr + "/tekvirt/guest-container-disk:latest"

// GuestDir holds the guest's disk images as files (guest.qcow2,
// guest.qcow2.xz, guest.raw) for import tests.
func (c *Cluster) GuestDir() string { return c.path("data", "guest") }

// GuestFilesPort is where the registry process serves GuestDir read-only
// on the node address, for pods (the registry itself is on loopback).
const GuestFilesPort = 5080

func (c *Cluster) guestFilesAddr() string {
	return net.JoinHostPort(c.NodeIP.String(), strconv.Itoa(GuestFilesPort))
}

// GuestURL is the URL pods download file of GuestDir from.
func (c *Cluster) GuestURL(file string) string {
	return "http://" + c.guestFilesAddr() + "/" + file
}

// publishGuest builds the guest (cached by its packages and init files),
// pushes it as a containerDisk and copies its disk images into GuestDir.
func (c *Cluster) publishGuest(ctx context.Context) error {
	g, err := guest.Build(ctx, c.path("cache"))
	if err != nil {
		return fmt.Errorf("building the guest: %w", err)
	}
	disks, err := g.Disks(ctx)
	if err != nil {
		return fmt.Errorf("building the guest disks: %w", err)
	}
	ref, err := pushGuestDisk(ctx, g, GuestImage)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.GuestDir(), 0o755); err != nil {
		return err
	}
	for src, name := range map[string]string{disks.QCOW2: "guest.qcow2", disks.QCOW2XZ: "guest.qcow2.xz", disks.Raw: "guest.raw"} {
		if err := copyIfChanged(src, filepath.Join(c.GuestDir(), name)); err != nil {
			return err
		}
	}
	c.progress("%-24s %s (kernel %s), files in %s", "guest containerDisk", ref, g.KernelVersion, c.GuestDir())
	return nil
}

// pushGuestDisk pushes g as a containerDisk to ref: its qcow2 disk under
// /disk/, its kernel and initrd under /boot/ for kernel boot.
func pushGuestDisk(ctx context.Context, g *guest.Guest, ref string) (string, error) {
	disks, err := g.Disks(ctx)
	if err != nil {
		return "", fmt.Errorf("building the guest disks: %w", err)
	}
	spec := ocibuild.Spec{Files: map[string]ocibuild.File{
		"/disk":             {Dir: true, Mode: 0o755},
		"/disk/guest.qcow2": {Source: disks.QCOW2, Mode: 0o644},
		"/boot":             {Dir: true, Mode: 0o755},
		"/boot/vmlinuz":     {Source: g.Kernel, Mode: 0o644},
		"/boot/initrd.gz":   {Source: g.Initrd, Mode: 0o644},
	}}
	pushed, err := ocibuild.Push(spec, ref)
	if err != nil {
		return "", fmt.Errorf("pushing containerDisk %s: %w", ref, err)
	}
	return pushed, nil
}

// copyIfChanged copies src to dst unless dst has src's size and is newer.
func copyIfChanged(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil {
		return err
	}
	if di, err := os.Stat(dst); err == nil && di.Size() == si.Size() && !di.ModTime().Before(si.ModTime()) {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst + ".tmp")
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}
