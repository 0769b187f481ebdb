package domain

import (
	"fmt"
	"net/netip"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// nicSlot is the PCI slot of the first NIC: a fixed, free slot, since
// libvirt's automatic placement clashed with other devices here.
const nicSlot = 0x1f

// DefaultInterface names the interface a VMI without any gets.
const DefaultInterface = "default"

// Interface is what the handler built for one of the guest's interfaces
// in the launcher Pod's network namespace.
type Interface struct {
	// Tap is the tap device QEMU opens (made by the handler, owned by the
	// launcher's user).
	Tap string
	// MAC is the guest's address on it.
	MAC string
	// Binding is the interface's binding to the pod network: "masquerade"
	// or "bridge" (the guest takes the Pod's address).
	Binding string `json:",omitempty"`
	// Address is the guest's address and network, Gateway its default
	// route: what the launcher's DHCP server hands out, with Routes (the
	// Pod's, for the bridge binding) and from Server (the gateway when
	// unset).
	Address netip.Prefix
	Gateway netip.Addr
	Server  netip.Addr         `json:",omitzero"`
	Routes  []podnetwork.Route `json:",omitempty"`
}

// Bindings of an Interface.
const (
	BindingMasquerade = "masquerade"
	BindingBridge     = "bridge"
)

// PodInterfaces are the VMI's interfaces as the runtime builds them: those
// it lists, or KubeVirt's default (masquerade on the pod network, named
// "default") when it lists none and does not turn the default off. Each
// must be a masquerade or bridge binding with the virtio model; other
// bindings, models and more than one interface are errors naming the field.
func PodInterfaces(vmi *v1.VirtualMachineInstance) ([]v1.Interface, error) {
	ifaces := vmi.Spec.Domain.Devices.Interfaces
	if auto := vmi.Spec.Domain.Devices.AutoattachPodInterface; len(ifaces) == 0 && len(vmi.Spec.Networks) == 0 && (auto == nil || *auto) {
		ifaces = []v1.Interface{{Name: DefaultInterface, InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
	}
	if len(ifaces) > 1 {
		return nil, fmt.Errorf("spec.domain.devices.interfaces: %d interfaces given; one is supported", len(ifaces))
	}
	for i, iface := range ifaces {
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
		if iface.Masquerade == nil && iface.Bridge == nil {
			return nil, fmt.Errorf("%s (%s): only the masquerade and bridge bindings to the pod network are supported", field, iface.Name)
		}
		if iface.Model != "" && iface.Model != v1.VirtIO {
			return nil, fmt.Errorf("%s.model %q is not supported (virtio)", field, iface.Model)
		}
	}
	return ifaces, nil
}

// ConfigureNetwork gives the guest a virtio NIC on the tap the handler
// made for each of its interfaces (libvirt's type='ethernet', managed='no':
// libvirt opens the tap and changes nothing of it).
func ConfigureNetwork(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	ifaces, err := PodInterfaces(vmi)
	if err != nil {
		return err
	}
	for i, iface := range ifaces {
		built, ok := opts.Interfaces[iface.Name]
		if !ok || built.Tap == "" {
			return fmt.Errorf("spec.domain.devices.interfaces[%d] (%s): the node prepared no tap for it", i, iface.Name)
		}
		slot := uint(nicSlot + i)
		zero := uint(0)
		d.Devices.Interfaces = append(d.Devices.Interfaces, libvirtxml.DomainInterface{
			Source:  &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}},
			Target:  &libvirtxml.DomainInterfaceTarget{Dev: built.Tap, Managed: "no"},
			MAC:     &libvirtxml.DomainInterfaceMAC{Address: built.MAC},
			Model:   &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			Alias:   &libvirtxml.DomainAlias{Name: "ua-" + iface.Name},
			Address: &libvirtxml.DomainAddress{PCI: &libvirtxml.DomainAddressPCI{Domain: &zero, Bus: &zero, Slot: &slot, Function: &zero}},
		})
	}
	return nil
}
