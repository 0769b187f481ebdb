package domain

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// Volume is a VMI volume as the launcher prepared it on the node.
type Volume struct {
	// Path of the disk image file.
	Path string
	// Format is the image format, "raw" or "qcow2".
	Format string
	// ReadOnly attaches the disk read-only (container disk bases, seeds).
	ReadOnly bool
	// FDGroup, when set, names the descriptor the launcher opened the file
	// as (runtime/diskfile) and hands to libvirt under this name; QEMU gets
	// that descriptor and nothing opens Path again, so a file swapped in
	// after the check is never used. Set for files in a tenant's volume.
	FDGroup string
}

// Options carry what the node knows and the VMI does not.
type Options struct {
	// KVM selects hardware virtualization; false runs TCG.
	KVM bool
	// Volumes maps VMI volume names to prepared files.
	Volumes map[string]Volume
	// Kernel and Initrd are the files of spec.domain.firmware.kernelBoot,
	// extracted from its container image.
	Kernel, Initrd string
	// AgentSocket is where the guest agent channel's socket goes.
	AgentSocket string
	// SerialSocket and SerialLog are the serial console's socket and log file.
	SerialSocket, SerialLog string
	// VNCSocket is where the display's VNC server listens.
	VNCSocket string
	// PCIDevices are the PCI addresses device plugins allocated to the
	// launcher, by resource name (PCIDevicesFromEnv).
	PCIDevices map[string][]string `json:",omitempty"`
	// Interfaces are what the handler built for the guest's interfaces in
	// the Pod's network namespace, by interface name.
	Interfaces map[string]Interface `json:",omitempty"`
}

// Configurator adds one concern of vmi to d.
type Configurator func(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error

// Configurators in the order Convert applies them.
var Configurators = []Configurator{
	ConfigureMachine,
	ConfigureCPUAndMemory,
	ConfigureBoot,
	ConfigureDisks,
	ConfigureNetwork,
	ConfigureChannels,
	ConfigureGraphics,
	ConfigureHostDevices,
}

// Name is the libvirt domain name of a VMI.
func Name(vmi *v1.VirtualMachineInstance) string { return vmi.Namespace + "_" + vmi.Name }

// UUID is the libvirt domain UUID of a VMI: its firmware UUID if given,
// else its UID.
func UUID(vmi *v1.VirtualMachineInstance) string {
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		return string(fw.UUID)
	}
	return string(vmi.UID)
}

// Convert builds the domain for vmi, or reports every field it cannot
// express: what the configurators cannot do, else any field outside the
// supported subset (which the webhook refuses too), so that no field a
// configurator does not read is dropped in silence.
func Convert(vmi *v1.VirtualMachineInstance, opts Options) (*libvirtxml.Domain, error) {
	d := &libvirtxml.Domain{}
	var errs []error
	for _, c := range Configurators {
		errs = append(errs, c(vmi, &opts, d))
	}
	if errors.Join(errs...) == nil {
		errs = append(errs, vmisubset.Check(&vmi.Spec))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return d, nil
}

// ConfigureMachine sets identity, machine type, lifecycle actions and the
// devices every domain gets (none: no balloon, no USB).
func ConfigureMachine(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	d.Type = "qemu"
	if opts.KVM {
		d.Type = "kvm"
	}
	d.Name = Name(vmi)
	d.UUID = UUID(vmi)
	if d.OS == nil {
		d.OS = &libvirtxml.DomainOS{}
	}
	d.OS.Type = &libvirtxml.DomainOSType{Type: "hvm", Arch: "x86_64", Machine: "pc"}
	d.Features = &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}}
	d.OnPoweroff, d.OnReboot, d.OnCrash = "destroy", "restart", "destroy"
	if d.Devices == nil {
		d.Devices = &libvirtxml.DomainDeviceList{}
	}
	d.Devices.MemBalloon = &libvirtxml.DomainMemBalloon{Model: "none"}
	// No USB controller: no device uses one, and libvirt would otherwise
	// add a UHCI controller by default.
	d.Devices.Controllers = append(d.Devices.Controllers, libvirtxml.DomainController{Type: "usb", Model: "none"})
	return nil
}
