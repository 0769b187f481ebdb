package podnet

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// Port is a guest port the Pod's address leads to.
type Port struct {
	Protocol string // "tcp" or "udp"
	Port     uint16
}

// Masquerade is KubeVirt's masquerade binding of the guest's interface to
// the pod network: the guest on a private network behind a bridge in the
// Pod, its traffic out NATed to the Pod's address, and what comes in on
// the Pod's address (on Ports, or on every port when Ports is empty)
// forwarded to the guest.
type Masquerade struct {
	// Tap is the tap device QEMU opens, owned by Owner and Group (the
	// launcher's user) so that it can without privileges.
	Tap          string
	Owner, Group uint32
	// MAC is the guest interface's: the only one whose frames pass.
	MAC net.HardwareAddr
	// Addresses are the gateway's (the bridge's) and the guest's.
	Addresses podnetwork.Masquerade
	// Ports, when set, are the only ones forwarded.
	Ports []Port
}

// Setup builds the binding in the network namespace ns (a launcher Pod's):
// a bridge holding the gateway address, the tap on it, forwarding on and
// the NAT and anti-spoofing rules. It is idempotent: what
// exists is kept, the rules are replaced.
func (m Masquerade) Setup(ns *os.File) error {
	if err := m.validate(); err != nil {
		return err
	}
	return inNamespace(ns, func() error {
		pod, err := netlink.LinkByName(podnetwork.PodInterface)
		if err != nil {
			return fmt.Errorf("the Pod's interface %s: %w", podnetwork.PodInterface, err)
		}
		mtu := pod.Attrs().MTU
		br, err := ensureBridge(podnetwork.BridgeName, mtu)
		if err != nil {
			return err
		}
		gw := &netlink.Addr{IPNet: &net.IPNet{IP: m.Addresses.Gateway.Addr().AsSlice(), Mask: net.CIDRMask(m.Addresses.Gateway.Bits(), 32)}}
		if err := netlink.AddrReplace(br, gw); err != nil {
			return fmt.Errorf("address %s on %s: %w", m.Addresses.Gateway, podnetwork.BridgeName, err)
		}
		if err := ensureTap(m.Tap, m.Owner, m.Group, mtu, br); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(br); err != nil {
			return fmt.Errorf("setting %s up: %w", podnetwork.BridgeName, err)
		}
		if err := setSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		return m.rules(ns)
	})
}

func (m Masquerade) validate() error {
	if len(m.MAC) != 6 {
		return fmt.Errorf("masquerade: MAC %q is not an Ethernet address", m.MAC)
	}
	if !m.Addresses.Gateway.Addr().Is4() || !m.Addresses.Guest.Addr().Is4() {
		return errors.New("masquerade: the gateway and guest need IPv4 addresses")
	}
	for _, p := range m.Ports {
		if p.Protocol != "tcp" && p.Protocol != "udp" || p.Port == 0 {
			return fmt.Errorf("masquerade: port %s/%s: want a port of tcp or udp", strconv.Itoa(int(p.Port)), p.Protocol)
		}
	}
	return nil
}

func ensureBridge(name string, mtu int) (netlink.Link, error) {
	if l, err := netlink.LinkByName(name); err == nil {
		return l, nil
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
	if err := netlink.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("adding the bridge %s: %w", name, err)
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("the bridge %s: %w", name, err)
	}
	return l, nil
}

func ensureTap(name string, owner, group uint32, mtu int, br netlink.Link) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		tap := &netlink.Tuntap{
			LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu},
			Mode:      netlink.TUNTAP_MODE_TAP,
			Flags:     netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR,
			Owner:     owner,
			Group:     group,
		}
		if err := netlink.LinkAdd(tap); err != nil {
			return fmt.Errorf("adding the tap %s: %w", name, err)
		}
		if l, err = netlink.LinkByName(name); err != nil {
			return fmt.Errorf("the tap %s: %w", name, err)
		}
	}
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("MTU of %s: %w", name, err)
	}
	if err := netlink.LinkSetMaster(l, br); err != nil {
		return fmt.Errorf("putting %s on %s: %w", name, br.Attrs().Name, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	return nil
}
