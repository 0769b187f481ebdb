package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/runtime/deviceplugin"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/launcher"
	"github.com/tekvirt/tekvirt/runtime/podnet"
	"github.com/tekvirt/tekvirt/runtime/podvolume"
)

// podNetNS is the launcher Pod's network namespace, which its launcher
// hands over (the caller checks it is not the node's and closes it).
func (d vmDir) podNetNS(ctx context.Context) (*os.File, error) {
	conn, err := d.pod.vm.DialUnix(ctx, launcher.NetNSSocket)
	if err != nil {
		// The launcher listens from its first moment; its container may
		// not have started yet.
		return nil, fmt.Errorf("%w: the launcher does not answer yet: %w", errPodNotHere, err)
	}
	defer conn.Close()
	return launcher.ReceiveNetNS(conn)
}

// plugNetwork builds the guest's interfaces in its launcher Pod's network
// namespace, which the launcher hands over on its socket, and returns what
// it built for the domain and the launcher's DHCP server.
func (h *Handler) plugNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (map[string]domain.Interface, error) {
	nics, err := domain.NICs(vmi)
	if err != nil {
		return nil, &permanentError{reason: "NetworkInvalid", err: err}
	}
	if len(nics) == 0 {
		return nil, nil
	}
	plan := make([]binding, len(nics))
	for i, nic := range nics {
		if plan[i], err = planBinding(vmi, i, nic); err != nil {
			return nil, &permanentError{reason: "NetworkInvalid", err: err}
		}
	}
	ns, err := d.podNetNS(ctx)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	out := map[string]domain.Interface{}
	for i, b := range plan {
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d] (%s)", i, nics[i].Name)
		built, err := b.setup(ns, d, i)
		if errors.Is(err, podnet.ErrNotPodNamespace) {
			return nil, &permanentError{reason: "NetworkInvalid", err: fmt.Errorf("the launcher Pod handed over %w", err)}
		}
		var perr *permanentError
		if errors.As(err, &perr) {
			perr.err = fmt.Errorf("%s: %w", field, perr.err)
			return nil, perr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		out[nics[i].Name] = built
	}
	return out, nil
}

// binding is one interface's binding to its network, ready to be built in
// the Pod's network namespace.
type binding struct {
	masquerade *podnet.Masquerade
	bridge     *podnet.Bridge
	// explicitMAC is the interface's macAddress: the bridge binding gives
	// the guest the Pod interface's MAC otherwise.
	explicitMAC bool
	// secondary: a Multus network's interface, bridged at layer 2.
	secondary bool
}

// planBinding checks vmi's interface i (nic) and plans its binding,
// everything but what the Pod's namespace tells.
func planBinding(vmi *v1.VirtualMachineInstance, i int, nic domain.NIC) (binding, error) {
	field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
	mac := podnetwork.MAC(string(vmi.UID), nic.Name)
	explicit := nic.MacAddress != ""
	if explicit {
		hw, err := net.ParseMAC(nic.MacAddress)
		if err != nil || len(hw) != 6 {
			return binding{}, fmt.Errorf("%s.macAddress %q is not an Ethernet address", field, nic.MacAddress)
		}
		mac = hw
	}
	switch {
	case nic.Secondary():
		return binding{
			bridge: &podnet.Bridge{
				Tap: podnetwork.SecondaryTap(nic.PodInterface), Owner: launcherpod.User, Group: launcherpod.Group, MAC: mac,
				PodInterface: nic.PodInterface, Name: podnetwork.SecondaryBridge(nic.PodInterface),
			},
			explicitMAC: explicit, secondary: true,
		}, nil
	case nic.Bridge != nil:
		if m := guestMAC(vmi, nic.Name); !explicit && m != nil {
			// The guest has taken a MAC already, on the Pod it migrates
			// from: it keeps it in this one.
			mac, explicit = m, true
		}
		return binding{
			bridge:      &podnet.Bridge{Tap: podnetwork.TapName(i), Owner: launcherpod.User, Group: launcherpod.Group, MAC: mac},
			explicitMAC: explicit,
		}, nil
	}
	m, err := masquerade(vmi, i, nic.Interface, mac)
	return binding{masquerade: &m}, err
}

// guestMAC is the MAC the domain gave vmi's interface name, as its status
// records it, or nil before it ran.
func guestMAC(vmi *v1.VirtualMachineInstance, name string) net.HardwareAddr {
	for _, ni := range vmi.Status.Interfaces {
		if ni.Name != name || ni.MAC == "" {
			continue
		}
		if hw, err := net.ParseMAC(ni.MAC); err == nil && len(hw) == 6 {
			return hw
		}
	}
	return nil
}

// setup builds the binding in ns, for the VMI's interface i.
func (b binding) setup(ns *os.File, d vmDir, i int) (domain.Interface, error) {
	if m := b.masquerade; m != nil {
		ipv6, err := m.Setup(ns)
		if err != nil {
			return domain.Interface{}, err
		}
		di := domain.Interface{
			Tap: m.Tap, MAC: m.MAC.String(), Binding: domain.BindingMasquerade,
			Address: m.Addresses.Guest, Gateway: m.Addresses.Gateway.Addr(),
		}
		if ipv6 {
			di.Address6 = m.IPv6.Guest.Addr()
		}
		return di, nil
	}
	br := *b.bridge
	iface := br.Interface()
	link, err := d.podLink(ns, i, iface)
	if err != nil {
		return domain.Interface{}, err
	}
	if !b.secondary && !link.Address.IsValid() {
		return domain.Interface{}, &permanentError{reason: "NetworkInvalid", err: fmt.Errorf(
			"the Pod's interface %s has no IPv4 address; the bridge binding hands the guest the Pod's", iface)}
	}
	br.Link = link
	if !b.explicitMAC {
		if br.MAC, err = net.ParseMAC(link.MAC); err != nil {
			return domain.Interface{}, &permanentError{reason: "NetworkInvalid", err: fmt.Errorf("the Pod's MAC %q: %w", link.MAC, err)}
		}
	}
	if err := br.Setup(ns); err != nil {
		return domain.Interface{}, err
	}
	if b.secondary {
		// The address the network's IPAM gave the Pod, if any, with the
		// interface's own routes: the pod network's interface keeps the
		// default route and the way to the DHCP server.
		di := domain.Interface{
			Tap: br.Tap, MAC: br.MAC.String(), Binding: domain.BindingBridge, Secondary: true, Bridge: br.Name,
			Address: link.Address, Gateway: link.Gateway, Routes: link.Routes,
		}
		if link.Address.IsValid() {
			di.Server = podnetwork.BridgeServerAddress
		}
		return di, nil
	}
	// The guest reaches the bridge's address (the DHCP server, the
	// launcher's port-forward) on the link, the rest as the Pod did.
	routes := append([]podnetwork.Route{{Dest: netip.PrefixFrom(podnetwork.BridgeServerAddress, 32)}}, link.Routes...)
	return domain.Interface{
		Tap: br.Tap, MAC: br.MAC.String(), Binding: domain.BindingBridge,
		Address: link.Address, Gateway: link.Gateway, Server: podnetwork.BridgeServerAddress, Routes: routes,
	}, nil
}

// podLink is what the Pod's interface iface had before the bridge binding
// of interface i took it: read once from the namespace, then kept in the
// handler's directory (which the Pod cannot write), since the Pod no
// longer holds it.
func (d vmDir) podLink(ns *os.File, i int, iface string) (podnet.PodLink, error) {
	name := fmt.Sprintf("podlink-%d.json", i)
	path := d.file(name)
	var link podnet.PodLink
	data, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(data, &link); err != nil {
			return link, fmt.Errorf("reading %s: %w", path, err)
		}
		return link, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return link, err
	}
	if link, err = podnet.DiscoverPodLink(ns, iface); err != nil {
		if errors.Is(err, podnet.ErrNotPodNamespace) {
			return link, err
		}
		return link, &permanentError{reason: "NetworkInvalid", err: err}
	}
	if data, err = json.Marshal(link); err != nil {
		return link, err
	}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return link, err
	}
	if err := (podvolume.Dir{Path: d.path}).WriteFile(name, data); err != nil {
		return link, fmt.Errorf("keeping the Pod's link: %w", err)
	}
	return link, nil
}

// masquerade is the binding of vmi's interface i (iface) to the pod
// network, with the guest's MAC: the networks of its
// spec.networks[].pod.vmNetworkCIDR and vmIPv6NetworkCIDR and the ports
// it lists (none: every port).
func masquerade(vmi *v1.VirtualMachineInstance, i int, iface v1.Interface, mac net.HardwareAddr) (podnet.Masquerade, error) {
	field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
	var cidr, cidr6 string
	network := "spec.networks"
	for k, n := range vmi.Spec.Networks {
		if n.Name == iface.Name && n.Pod != nil {
			cidr, cidr6, network = n.Pod.VMNetworkCIDR, n.Pod.VMIPv6NetworkCIDR, fmt.Sprintf("spec.networks[%d]", k)
		}
	}
	addrs, err := podnetwork.MasqueradeAddresses(cidr)
	if err != nil {
		return podnet.Masquerade{}, fmt.Errorf("%s.pod: %w", network, err)
	}
	addrs6, err := podnetwork.MasqueradeIPv6Addresses(cidr6)
	if err != nil {
		return podnet.Masquerade{}, fmt.Errorf("%s.pod: %w", network, err)
	}
	var ports []podnet.Port
	for j, p := range iface.Ports {
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		if proto != "tcp" && proto != "udp" || p.Port < 1 || p.Port > 65535 {
			return podnet.Masquerade{}, fmt.Errorf("%s.ports[%d]: %s port %d: want a port 1-65535 of TCP or UDP", field, j, p.Protocol, p.Port)
		}
		ports = append(ports, podnet.Port{Protocol: proto, Port: uint16(p.Port)})
	}
	return podnet.Masquerade{
		Tap: podnetwork.TapName(i), Owner: launcherpod.User, Group: launcherpod.Group,
		MAC: mac, Addresses: addrs, IPv6: addrs6, Ports: ports,
	}, nil
}

// tunDevices is how many launcher Pods of a node may hold /dev/net/tun at
// once: KubeVirt's figure, the kubelet's default Pod limit.
const tunDevices = 110

// tunPlugin advertises /dev/net/tun to the kubelet as
// podnetwork.TunResource, which every launcher Pod requests: QEMU opens
// the guest's tap through it.
func (h *Handler) tunPlugin() *deviceplugin.Plugin {
	return &deviceplugin.Plugin{
		Resource: podnetwork.TunResource,
		Path:     "/dev/net/tun",
		Count:    tunDevices,
		Dir:      filepath.Join(h.kubeletRoot(), "device-plugins"),
		Socket:   "tekvirt-tun.sock",
	}
}
