package podnet

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// PodLink is what the CNI plugin gave the Pod's interface: what the bridge
// binding takes from the Pod and hands to the guest. Once the binding is
// built the Pod no longer holds it, so the handler keeps it.
type PodLink struct {
	// Address is the Pod's IPv4 address and network.
	Address netip.Prefix
	// Gateway is the default route's (invalid: none).
	Gateway netip.Addr `json:",omitzero"`
	// Routes are the interface's other routes, the network's own aside.
	Routes []podnetwork.Route `json:",omitempty"`
	// MAC is the interface's address, which the guest takes unless its
	// interface names one.
	MAC string
	MTU int
}

// DiscoverPodLink reads the Pod's interface in ns before the bridge
// binding takes it: one IPv4 address, its routes, MAC and MTU.
func DiscoverPodLink(ns *os.File) (PodLink, error) {
	var pl PodLink
	err := inNamespace(ns, func() error {
		pod, err := netlink.LinkByName(podnetwork.PodInterface)
		if err != nil {
			return fmt.Errorf("the Pod's interface %s: %w", podnetwork.PodInterface, err)
		}
		addrs, err := netlink.AddrList(pod, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("addresses of %s: %w", podnetwork.PodInterface, err)
		}
		addrs = slices.DeleteFunc(addrs, func(a netlink.Addr) bool { return a.Scope != unix.RT_SCOPE_UNIVERSE })
		if len(addrs) != 1 {
			return fmt.Errorf("the Pod's interface %s has %d IPv4 addresses; the bridge binding needs one", podnetwork.PodInterface, len(addrs))
		}
		addr, _ := netip.AddrFromSlice(addrs[0].IP.To4())
		ones, _ := addrs[0].Mask.Size()
		pl.Address = netip.PrefixFrom(addr, ones)
		routes, err := netlink.RouteList(pod, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("routes of %s: %w", podnetwork.PodInterface, err)
		}
		for _, r := range routes {
			gw, _ := netip.AddrFromSlice(r.Gw.To4())
			dest := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
			if r.Dst != nil {
				dst, _ := netip.AddrFromSlice(r.Dst.IP.To4())
				ones, _ := r.Dst.Mask.Size()
				dest = netip.PrefixFrom(dst, ones)
			}
			switch {
			case dest.Bits() == 0:
				pl.Gateway = gw
			case dest == pl.Address.Masked() && !gw.IsValid():
				// the network's own, which the guest gets from its mask
			default:
				pl.Routes = append(pl.Routes, podnetwork.Route{Dest: dest, Via: gw})
			}
		}
		pl.MAC = pod.Attrs().HardwareAddr.String()
		pl.MTU = pod.Attrs().MTU
		return nil
	})
	return pl, err
}

// Bridge is KubeVirt's bridge binding of the guest's interface to the pod
// network: the Pod's interface moved under a bridge with the guest's tap,
// its address and routes handed to the guest (by the launcher's DHCP
// server, which answers from podnetwork.BridgeServerAddress on the bridge).
// The guest is the Pod on the network: reached at the Pod's address on
// every port, its traffic leaving unchanged.
type Bridge struct {
	// Tap is the tap device QEMU opens, owned by Owner and Group.
	Tap          string
	Owner, Group uint32
	// MAC is the guest interface's: the only one whose frames pass. When
	// it is the Pod interface's, that interface takes another.
	MAC net.HardwareAddr
	// Link is what the Pod's interface had (DiscoverPodLink).
	Link PodLink
}

// Setup builds the binding in the network namespace ns. It is
// idempotent: a Pod interface already under the bridge is left as it is,
// the rest is made again if missing and the rules replaced.
func (b Bridge) Setup(ns *os.File) error {
	if len(b.MAC) != 6 {
		return fmt.Errorf("bridge binding: MAC %q is not an Ethernet address", b.MAC)
	}
	if !b.Link.Address.Addr().Is4() {
		return errors.New("bridge binding: the Pod's address is not IPv4")
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
		if pod.Attrs().MasterIndex != br.Attrs().Index {
			if err := b.enslave(pod, br); err != nil {
				return err
			}
		}
		server := &netlink.Addr{IPNet: &net.IPNet{IP: podnetwork.BridgeServerAddress.AsSlice(), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrReplace(br, server); err != nil {
			return fmt.Errorf("address %s on %s: %w", podnetwork.BridgeServerAddress, podnetwork.BridgeName, err)
		}
		if err := ensureTap(b.Tap, b.Owner, b.Group, mtu, br); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(br); err != nil {
			return fmt.Errorf("setting %s up: %w", podnetwork.BridgeName, err)
		}
		// The launcher (port-forward) reaches the guest on the bridge.
		guest := &netlink.Route{
			LinkIndex: br.Attrs().Index, Scope: netlink.SCOPE_LINK,
			Dst: &net.IPNet{IP: b.Link.Address.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)},
			Src: podnetwork.BridgeServerAddress.AsSlice(),
		}
		if err := netlink.RouteReplace(guest); err != nil {
			return fmt.Errorf("route to the guest at %s: %w", b.Link.Address.Addr(), err)
		}
		return b.rules(ns)
	})
}

// enslave takes the Pod's interface's addresses (its routes go with them),
// gives it another MAC if the guest takes its own, and puts it on br.
func (b Bridge) enslave(pod, br netlink.Link) error {
	if err := netlink.LinkSetDown(pod); err != nil {
		return fmt.Errorf("setting %s down: %w", podnetwork.PodInterface, err)
	}
	addrs, err := netlink.AddrList(pod, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", podnetwork.PodInterface, err)
	}
	for _, a := range addrs {
		if err := netlink.AddrDel(pod, &a); err != nil {
			return fmt.Errorf("taking %s from %s: %w", a.IPNet, podnetwork.PodInterface, err)
		}
	}
	if slices.Equal(pod.Attrs().HardwareAddr, b.MAC) {
		mac, err := localMAC()
		if err != nil {
			return err
		}
		if err := netlink.LinkSetHardwareAddr(pod, mac); err != nil {
			return fmt.Errorf("a new MAC for %s: %w", podnetwork.PodInterface, err)
		}
	}
	if err := netlink.LinkSetMaster(pod, br); err != nil {
		return fmt.Errorf("putting %s on %s: %w", podnetwork.PodInterface, podnetwork.BridgeName, err)
	}
	if err := netlink.LinkSetUp(pod); err != nil {
		return fmt.Errorf("setting %s up: %w", podnetwork.PodInterface, err)
	}
	return nil
}

// localMAC is a random, locally administered unicast MAC.
func localMAC() (net.HardwareAddr, error) {
	mac := make(net.HardwareAddr, 6)
	if _, err := rand.Read(mac); err != nil {
		return nil, err
	}
	mac[0] = mac[0]&^0x01 | 0x02
	return mac, nil
}
