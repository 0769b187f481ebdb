package handler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/runtime/deviceplugin"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/launcher"
	"github.com/tekvirt/tekvirt/runtime/podnet"
)

// plugNetwork builds the guest's interfaces in its launcher Pod's network
// namespace, which the launcher hands over on its socket, and returns what
// it built for the domain and the launcher's DHCP server.
func (h *Handler) plugNetwork(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (map[string]domain.Interface, error) {
	ifaces, err := domain.PodInterfaces(vmi)
	if err != nil {
		return nil, &permanentError{reason: "NetworkInvalid", err: err}
	}
	if len(ifaces) == 0 {
		return nil, nil
	}
	plan := make([]podnet.Masquerade, len(ifaces))
	for i, iface := range ifaces {
		if plan[i], err = masquerade(vmi, i, iface); err != nil {
			return nil, &permanentError{reason: "NetworkInvalid", err: err}
		}
	}
	conn, err := d.pod.vm.DialUnix(ctx, launcher.NetNSSocket)
	if err != nil {
		// The launcher listens from its first moment; its container may
		// not have started yet.
		return nil, fmt.Errorf("%w: the launcher does not answer yet: %w", errPodNotHere, err)
	}
	ns, err := launcher.ReceiveNetNS(conn)
	conn.Close()
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	out := map[string]domain.Interface{}
	for i, m := range plan {
		if err := m.Setup(ns); err != nil {
			if errors.Is(err, podnet.ErrNotPodNamespace) {
				return nil, &permanentError{reason: "NetworkInvalid", err: fmt.Errorf("the launcher Pod handed over %w", err)}
			}
			return nil, fmt.Errorf("spec.domain.devices.interfaces[%d] (%s): %w", i, ifaces[i].Name, err)
		}
		out[ifaces[i].Name] = domain.Interface{Tap: m.Tap, MAC: m.MAC.String(), Address: m.Addresses.Guest, Gateway: m.Addresses.Gateway.Addr()}
	}
	return out, nil
}

// masquerade is the binding of vmi's interface i (iface) to the pod
// network: its MAC (spec.domain.devices.interfaces[].macAddress, else a
// stable one), the network of its spec.networks[].pod.vmNetworkCIDR and
// the ports it lists (none: every port). The bridge binding gets the same
// for now.
func masquerade(vmi *v1.VirtualMachineInstance, i int, iface v1.Interface) (podnet.Masquerade, error) {
	field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
	mac := podnetwork.MAC(string(vmi.UID), iface.Name)
	if iface.MacAddress != "" {
		hw, err := net.ParseMAC(iface.MacAddress)
		if err != nil || len(hw) != 6 {
			return podnet.Masquerade{}, fmt.Errorf("%s.macAddress %q is not an Ethernet address", field, iface.MacAddress)
		}
		mac = hw
	}
	addrs, err := podnetwork.MasqueradeAddresses("")
	for k, n := range vmi.Spec.Networks {
		if n.Name == iface.Name && n.Pod != nil {
			if addrs, err = podnetwork.MasqueradeAddresses(n.Pod.VMNetworkCIDR); err != nil {
				return podnet.Masquerade{}, fmt.Errorf("spec.networks[%d].pod: %w", k, err)
			}
		}
	}
	if err != nil {
		return podnet.Masquerade{}, err
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
		MAC: mac, Addresses: addrs, Ports: ports,
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
