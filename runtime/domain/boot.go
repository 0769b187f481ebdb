package domain

import (
	"fmt"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// ConfigureBoot sets direct kernel boot from spec.domain.firmware.kernelBoot,
// whose kernel and initrd the launcher extracted to Options; without it the
// guest boots from its disks (boot order per disk, see ConfigureDisks).
func ConfigureBoot(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	fw := vmi.Spec.Domain.Firmware
	if fw == nil {
		return nil
	}
	if fw.Bootloader != nil && fw.Bootloader.EFI != nil {
		return fmt.Errorf("spec.domain.firmware.bootloader.efi is not supported (BIOS only)")
	}
	kb := fw.KernelBoot
	if kb == nil {
		return nil
	}
	if kb.Container == nil {
		return fmt.Errorf("spec.domain.firmware.kernelBoot.container is required")
	}
	if opts.Kernel == "" {
		return fmt.Errorf("spec.domain.firmware.kernelBoot: kernel %s of %s was not extracted", kb.Container.KernelPath, kb.Container.Image)
	}
	if kb.Container.InitrdPath != "" && opts.Initrd == "" {
		return fmt.Errorf("spec.domain.firmware.kernelBoot: initrd %s of %s was not extracted", kb.Container.InitrdPath, kb.Container.Image)
	}
	d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = opts.Kernel, opts.Initrd, kb.KernelArgs
	return nil
}
