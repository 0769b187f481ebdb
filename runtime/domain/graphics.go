package domain

import (
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// vgaVRAMKiB is the display's video memory, as KubeVirt gives its VGA
// device (16 MiB).
const vgaVRAMKiB = 16384

// ConfigureGraphics adds, unless spec.domain.devices.autoattachGraphicsDevice
// is false (KubeVirt's default attaches one), a VGA display whose VNC
// server listens on a socket only: reachable through the node's handler,
// never on a network address.
func ConfigureGraphics(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	if a := vmi.Spec.Domain.Devices.AutoattachGraphicsDevice; (a != nil && !*a) || opts.VNCSocket == "" {
		return nil
	}
	d.Devices.Graphics = append(d.Devices.Graphics, libvirtxml.DomainGraphic{VNC: &libvirtxml.DomainGraphicVNC{
		Listeners: []libvirtxml.DomainGraphicListener{{Socket: &libvirtxml.DomainGraphicListenerSocket{Socket: opts.VNCSocket}}},
	}})
	heads := uint(1)
	d.Devices.Videos = append(d.Devices.Videos, libvirtxml.DomainVideo{
		Model: libvirtxml.DomainVideoModel{Type: "vga", VRam: vgaVRAMKiB, Heads: heads},
	})
	return nil
}
