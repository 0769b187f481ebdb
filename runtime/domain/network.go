package domain

import (
	"fmt"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// nicSlot is the PCI slot of the first NIC: a fixed, free slot, since
// libvirt's automatic placement clashed with other devices here.
const nicSlot = 0x1f

// DefaultInterface names the interface a VMI without any gets.
const DefaultInterface = "default"

// ConfigureNetwork gives the guest pod-like user-mode networking for its one
// interface (masquerade or bridge binding to the pod network); other
// bindings, models and more interfaces are errors naming the field.
func ConfigureNetwork(vmi *v1.VirtualMachineInstance, _ *Options, d *libvirtxml.Domain) error {
	ifaces := vmi.Spec.Domain.Devices.Interfaces
	if auto := vmi.Spec.Domain.Devices.AutoattachPodInterface; len(ifaces) == 0 && len(vmi.Spec.Networks) == 0 && (auto == nil || *auto) {
		// KubeVirt's default: a VMI that names no network gets the pod
		// network, masquerade.
		ifaces = []v1.Interface{{Name: DefaultInterface, InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
	}
	if len(ifaces) > 1 {
		return fmt.Errorf("spec.domain.devices.interfaces: %d interfaces given; one is supported", len(ifaces))
	}
	for i, iface := range ifaces {
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
		if iface.Masquerade == nil && iface.Bridge == nil {
			return fmt.Errorf("%s (%s): only the masquerade and bridge bindings to the pod network are supported", field, iface.Name)
		}
		if iface.Model != "" && iface.Model != v1.VirtIO {
			return fmt.Errorf("%s.model %q is not supported (virtio)", field, iface.Model)
		}
		slot := uint(nicSlot)
		zero := uint(0)
		d.Devices.Interfaces = append(d.Devices.Interfaces, libvirtxml.DomainInterface{
			Source: &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: "ua-" + iface.Name},
			Address: &libvirtxml.DomainAddress{PCI: &libvirtxml.DomainAddressPCI{
				Domain: &zero, Bus: &zero, Slot: &slot, Function: &zero,
			}},
		})
	}
	return nil
}
