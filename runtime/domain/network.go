package domain

import (
	"errors"
	"fmt"
	"net/netip"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// nicSlot is the PCI slot of the first NIC, the others following it up to
// the bus's last (0x1f, hence podnetwork.MaxInterfaces): fixed, free
// slots, since libvirt's automatic placement clashed with other devices
// here, and in the order of the VMI's interfaces, which the guest names
// its NICs by (eth0, eth1, ...).
const nicSlot = 0x20 - podnetwork.MaxInterfaces

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
	// Address6 is the guest's IPv6 address on masquerade's IPv6 network,
	// when the Pod has IPv6: what the launcher's DHCPv6 server hands out.
	Address6 netip.Addr `json:",omitzero"`
	// Secondary: on a Multus network, bridged to the interface Multus
	// attached. Without an Address (a network without IPAM) it is layer 2
	// only: no DHCP, the guest brings its own address.
	Secondary bool `json:",omitempty"`
	// Bridge is the bridge in the Pod that the tap is on, where the
	// launcher's DHCP server answers ("": podnetwork.BridgeName).
	Bridge string `json:",omitempty"`
}

// Bindings of an Interface.
const (
	BindingMasquerade = "masquerade"
	BindingBridge     = "bridge"
)

// NIC is one of the guest's interfaces and the network it joins.
type NIC struct {
	v1.Interface
	// Network is the interface's: the pod network or a Multus one.
	Network v1.Network
	// PodInterface is the launcher Pod's interface the binding takes or
	// routes through: podnetwork.PodInterface on the pod network, the one
	// Multus attached (podnetwork.SecondaryInterface) otherwise.
	PodInterface string
}

// Secondary reports whether n is on a Multus network.
func (n NIC) Secondary() bool { return n.Network.Multus != nil }

// NICs are the VMI's interfaces as the runtime builds them: those it
// lists, each with its network (the pod network when the VMI lists no
// network), or KubeVirt's default (masquerade on the pod network, named
// "default") when it lists none and does not turn the default off. On the
// pod network an interface takes the masquerade or bridge binding, on a
// Multus network bridge; the model is virtio. Anything else is an error
// naming the field.
func NICs(vmi *v1.VirtualMachineInstance) ([]NIC, error) {
	ifaces := vmi.Spec.Domain.Devices.Interfaces
	if auto := vmi.Spec.Domain.Devices.AutoattachPodInterface; len(ifaces) == 0 && len(vmi.Spec.Networks) == 0 && (auto == nil || *auto) {
		ifaces = []v1.Interface{{Name: DefaultInterface, InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
	}
	networks := map[string]v1.Network{}
	for _, n := range vmi.Spec.Networks {
		networks[n.Name] = n
	}
	if len(ifaces) > podnetwork.MaxInterfaces {
		return nil, fmt.Errorf("spec.domain.devices.interfaces: %d interfaces; a guest gets at most %d", len(ifaces), podnetwork.MaxInterfaces)
	}
	nics := make([]NIC, 0, len(ifaces))
	onPod := ""
	for i, iface := range ifaces {
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d] (%s)", i, iface.Name)
		n, ok := networks[iface.Name]
		switch {
		case len(vmi.Spec.Networks) == 0:
			n = v1.Network{Name: iface.Name, NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}
		case !ok:
			return nil, fmt.Errorf("%s: no network of that name in spec.networks", field)
		}
		if n.Pod != nil && onPod != "" {
			return nil, fmt.Errorf("%s: %s is already on the pod network", field, onPod)
		}
		nic, err := bind(iface, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		if n.Pod != nil {
			onPod = iface.Name
		}
		nics = append(nics, nic)
	}
	return nics, nil
}

// bind is iface on network n, if the runtime binds it so.
func bind(iface v1.Interface, n v1.Network) (NIC, error) {
	nic := NIC{Interface: iface, Network: n}
	switch {
	case iface.Model != "" && iface.Model != v1.VirtIO:
		return nic, fmt.Errorf("model %q is not supported (virtio)", iface.Model)
	case n.Pod != nil && iface.Masquerade == nil && iface.Bridge == nil:
		return nic, errors.New("only the masquerade and bridge bindings to the pod network are supported")
	case n.Pod != nil:
		nic.PodInterface = podnetwork.PodInterface
	case n.Multus != nil && iface.Bridge == nil:
		return nic, errors.New("only the bridge binding to a Multus network is supported")
	case n.Multus != nil:
		nic.PodInterface = podnetwork.SecondaryInterface(n.Name)
	default:
		return nic, fmt.Errorf("network %s is neither the pod network nor a Multus one", n.Name)
	}
	return nic, nil
}

// ConfigureNetwork gives the guest a virtio NIC on the tap the handler
// made for each of its interfaces (libvirt's type='ethernet', managed='no':
// libvirt opens the tap and changes nothing of it).
func ConfigureNetwork(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	ifaces, err := NICs(vmi)
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
