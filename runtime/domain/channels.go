package domain

import (
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// AgentChannel is the virtio-serial name of the QEMU guest agent.
const AgentChannel = "org.qemu.guest_agent.0"

// ConfigureChannels adds the guest agent channel and, unless
// spec.domain.devices.autoattachSerialConsole is false, a serial console on
// a socket whose output is also kept in a log file.
func ConfigureChannels(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	if opts.AgentSocket != "" {
		d.Devices.Channels = append(d.Devices.Channels, libvirtxml.DomainChannel{
			Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: opts.AgentSocket}},
			Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: AgentChannel}},
		})
	}
	if a := vmi.Spec.Domain.Devices.AutoattachSerialConsole; a != nil && !*a {
		return nil
	}
	if opts.SerialSocket == "" {
		return nil
	}
	port := uint(0)
	serial := libvirtxml.DomainSerial{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: opts.SerialSocket}},
		Target: &libvirtxml.DomainSerialTarget{Port: &port},
	}
	if opts.SerialLog != "" {
		serial.Log = &libvirtxml.DomainChardevLog{File: opts.SerialLog, Append: "on"}
	}
	d.Devices.Serials = append(d.Devices.Serials, serial)
	d.Devices.Consoles = append(d.Devices.Consoles, libvirtxml.DomainConsole{
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port},
	})
	return nil
}
