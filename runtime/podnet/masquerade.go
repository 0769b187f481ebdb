package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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
	// IPv6 are the same on the IPv6 network, built when the Pod has a
	// global IPv6 address (a dual-stack cluster); zero: never.
	IPv6 podnetwork.Masquerade
	// Ports, when set, are the only ones forwarded.
	Ports []Port
}

// Setup builds the binding in the network namespace ns (a launcher Pod's):
// a bridge holding the gateway address, the tap on it, forwarding on and
// the NAT and anti-spoofing rules; the same for IPv6 when the Pod has an
// IPv6 address, which it reports. It is idempotent: what exists is kept,
// the rules are replaced.
func (m Masquerade) Setup(ns *os.File) (ipv6 bool, err error) {
	if err := m.validate(); err != nil {
		return false, err
	}
	err = inNamespace(ns, func() error {
		pod, err := netlink.LinkByName(podnetwork.PodInterface)
		if err != nil {
			return fmt.Errorf("the Pod's interface %s: %w", podnetwork.PodInterface, err)
		}
		if m.IPv6.Guest.IsValid() {
			if ipv6, err = hasGlobalIPv6(pod); err != nil {
				return err
			}
		}
		mtu := pod.Attrs().MTU
		br, err := ensureBridge(podnetwork.BridgeName, mtu)
		if err != nil {
			return err
		}
		gateways := []netip.Prefix{m.Addresses.Gateway}
		if ipv6 {
			gateways = append(gateways, m.IPv6.Gateway)
		}
		for _, gw := range gateways {
			// No duplicate address detection: the address is the
			// gateway's from the start, and only the guest shares the link.
			a := &netlink.Addr{IPNet: &net.IPNet{IP: gw.Addr().AsSlice(), Mask: net.CIDRMask(gw.Bits(), gw.Addr().BitLen())}, Flags: unix.IFA_F_NODAD}
			if err := netlink.AddrReplace(br, a); err != nil {
				return fmt.Errorf("address %s on %s: %w", gw, podnetwork.BridgeName, err)
			}
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
		if ipv6 {
			if err := setSysctl("net/ipv6/conf/all/forwarding", "1"); err != nil {
				return err
			}
		}
		return m.rules(ns, ipv6)
	})
	return ipv6, err
}

// hasGlobalIPv6 reports whether link holds an IPv6 address beyond its
// link-local one.
func hasGlobalIPv6(link netlink.Link) (bool, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return false, fmt.Errorf("IPv6 addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		if a.IP.IsGlobalUnicast() {
			return true, nil
		}
	}
	return false, nil
}

func (m Masquerade) validate() error {
	if len(m.MAC) != 6 {
		return fmt.Errorf("masquerade: MAC %q is not an Ethernet address", m.MAC)
	}
	if !m.Addresses.Gateway.Addr().Is4() || !m.Addresses.Guest.Addr().Is4() {
		return errors.New("masquerade: the gateway and guest need IPv4 addresses")
	}
	if m.IPv6.Guest.IsValid() && (!m.IPv6.Gateway.Addr().Is6() || !m.IPv6.Guest.Addr().Is6()) {
		return errors.New("masquerade: the IPv6 gateway and guest need IPv6 addresses")
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
