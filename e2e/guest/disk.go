package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// minDiskSize is the smallest FAT file system holding bootloader, kernel
// and initrd, in MiB; a larger initrd (the worker's) gets room for itself.
const minDiskSize = 64

// diskSize is the file system's size in MiB for a kernel and initrd of
// this many bytes: their size, a tenth more and 8 MiB for the file system.
func diskSize(payload int64) int64 {
	return max(minDiskSize, (payload+payload/10)>>20+8)
}

// syslinuxConfig boots the kernel with the serial console.
const syslinuxConfig = "DEFAULT linux\nLABEL linux\n  KERNEL vmlinuz\n  INITRD initrd.gz\n  APPEND console=ttyS0 panic=-1 quiet\n"

// Disks are the guest as bootable disk images, for containerDisks and
// import tests.
type Disks struct {
	// Raw is a BIOS-bootable image: a FAT file system (no partition table)
	// with syslinux in its boot sector, the kernel and the initrd.
	Raw string
	// QCOW2 is Raw converted to qcow2, and QCOW2XZ that compressed with xz.
	QCOW2, QCOW2XZ string
}

// Disks writes the bootable disk images next to the kernel and initrd,
// unless they are there. Debian's syslinux installs into the image file
// with mtools, so no loop device or mount is needed.
func (g *Guest) Disks(ctx context.Context) (*Disks, error) {
	dir := filepath.Dir(g.Initrd)
	d := &Disks{Raw: filepath.Join(dir, "disk.img"), QCOW2: filepath.Join(dir, "disk.qcow2"), QCOW2XZ: filepath.Join(dir, "disk.qcow2.xz")}
	if _, err := os.Stat(d.QCOW2XZ); err == nil {
		return d, nil
	}
	tmp := d.Raw + ".tmp"
	cfg := filepath.Join(dir, "syslinux.cfg")
	if err := os.WriteFile(cfg, []byte(syslinuxConfig), 0o644); err != nil {
		return nil, err
	}
	var payload int64
	for _, f := range []string{g.Kernel, g.Initrd} {
		st, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		payload += st.Size()
	}
	steps := [][]string{
		{"truncate", "-s", fmt.Sprintf("%dM", diskSize(payload)), tmp},
		{"mkfs.vfat", "-n", "TEKVIRT", tmp},
		{"syslinux", "--install", tmp},
		{"mcopy", "-i", tmp, g.Kernel, g.Initrd, cfg, "::"},
	}
	for _, s := range steps {
		if err := run(ctx, dir, s[0], s[1:]...); err != nil {
			return nil, fmt.Errorf("making the boot disk: %w", err)
		}
	}
	if err := os.Rename(tmp, d.Raw); err != nil {
		return nil, err
	}
	if err := run(ctx, dir, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", d.Raw, d.QCOW2); err != nil {
		return nil, err
	}
	if err := run(ctx, dir, "xz", "-k", "-f", "-T0", d.QCOW2); err != nil {
		return nil, err
	}
	return d, nil
}
