package podnet

import (
	"cmp"
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

// DiscoverPodLink reads the Pod's interface iface in ns before the bridge
// binding takes it: its IPv4 address (at most one; none on a Multus
// network without IPAM), routes, MAC and MTU.
func DiscoverPodLink(ns *os.File, iface string) (PodLink, error) {
	var pl PodLink
	err := inNamespace(ns, func() error {
		pod, err := netlink.LinkByName(iface)
		if err != nil {
			return fmt.Errorf("the Pod's interface %s: %w", iface, err)
		}
		addrs, err := netlink.AddrList(pod, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("addresses of %s: %w", iface, err)
		}
		addrs = slices.DeleteFunc(addrs, func(a netlink.Addr) bool { return a.Scope != unix.RT_SCOPE_UNIVERSE })
		if len(addrs) > 1 {
			return fmt.Errorf("the Pod's interface %s has %d IPv4 addresses; the bridge binding hands the guest one", iface, len(addrs))
		}
		pl.MAC = pod.Attrs().HardwareAddr.String()
		pl.MTU = pod.Attrs().MTU
		if len(addrs) == 0 {
			return nil
		}
		addr, _ := netip.AddrFromSlice(addrs[0].IP.To4())
		ones, _ := addrs[0].Mask.Size()
		pl.Address = netip.PrefixFrom(addr, ones)
		routes, err := netlink.RouteList(pod, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("routes of %s: %w", iface, err)
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
		return nil
	})
	return pl, err
}

// Bridge is KubeVirt's bridge binding of the guest's interface to a Pod
// interface: on the pod network, the Pod's eth0 moved under a bridge with
// the guest's tap, its address and routes handed to the guest (by the
// launcher's DHCP server, which answers from
// podnetwork.BridgeServerAddress on the bridge), so that the guest is the
// Pod on the network: reached at the Pod's address on every port, its
// traffic leaving unchanged. On a Multus network the interface Multus
// attached is bridged the same way: the address its IPAM gave the Pod goes
// to the guest, and without one the binding is layer 2 only (the guest
// brings its own address).
type Bridge struct {
	// Tap is the tap device QEMU opens, owned by Owner and Group.
	Tap          string
	Owner, Group uint32
	// MAC is the guest interface's: the only one whose frames pass. When
	// it is the Pod interface's, that interface takes another.
	MAC net.HardwareAddr
	// PodInterface is the interface the bridge takes and Name the
	// bridge's (empty: the pod network's, podnetwork.PodInterface and
	// podnetwork.BridgeName).
	PodInterface, Name string
	// Link is what the Pod's interface had (DiscoverPodLink). Without an
	// address the binding is layer 2 only: no DHCP, no address checks.
	Link PodLink
}

// Interface and name are b's Pod interface and bridge, defaults applied.
func (b Bridge) Interface() string { return cmp.Or(b.PodInterface, podnetwork.PodInterface) }
func (b Bridge) name() string      { return cmp.Or(b.Name, podnetwork.BridgeName) }

// serves: the guest gets an address from the launcher's DHCP server.
func (b Bridge) serves() bool { return b.Link.Address.IsValid() }

// Setup builds the binding in the network namespace ns. It is
// idempotent: a Pod interface already under the bridge is left as it is,
// the rest is made again if missing and the rules replaced.
func (b Bridge) Setup(ns *os.File) error {
	if len(b.MAC) != 6 {
		return fmt.Errorf("bridge binding: MAC %q is not an Ethernet address", b.MAC)
	}
	if b.serves() && !b.Link.Address.Addr().Is4() {
		return errors.New("bridge binding: the Pod's address is not IPv4")
	}
	return inNamespace(ns, func() error {
		pod, err := netlink.LinkByName(b.Interface())
		if err != nil {
			return fmt.Errorf("the Pod's interface %s: %w", b.Interface(), err)
		}
		mtu := pod.Attrs().MTU
		br, err := ensureBridge(b.name(), mtu)
		if err != nil {
			return err
		}
		if pod.Attrs().MasterIndex != br.Attrs().Index {
			if err := b.enslave(pod, br); err != nil {
				return err
			}
		}
		if err := ensureTap(b.Tap, b.Owner, b.Group, mtu, br); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(br); err != nil {
			return fmt.Errorf("setting %s up: %w", b.name(), err)
		}
		if b.serves() {
			if err := b.serveGuest(br); err != nil {
				return err
			}
		}
		return b.rules(ns)
	})
}

// serveGuest gives the bridge br the DHCP server's address and a route to
// the guest, which the launcher (port-forward) reaches on the bridge.
func (b Bridge) serveGuest(br netlink.Link) error {
	server := &netlink.Addr{IPNet: &net.IPNet{IP: podnetwork.BridgeServerAddress.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := netlink.AddrReplace(br, server); err != nil {
		return fmt.Errorf("address %s on %s: %w", podnetwork.BridgeServerAddress, b.name(), err)
	}
	guest := &netlink.Route{
		LinkIndex: br.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: b.Link.Address.Addr().AsSlice(), Mask: net.CIDRMask(32, 32)},
		Src: podnetwork.BridgeServerAddress.AsSlice(),
	}
	if err := netlink.RouteReplace(guest); err != nil {
		return fmt.Errorf("route to the guest at %s: %w", b.Link.Address.Addr(), err)
	}
	return nil
}

// enslave takes the Pod's interface's addresses (its routes go with them),
// gives it another MAC if the guest takes its own, and puts it on br as a
// port that does not learn.
func (b Bridge) enslave(pod, br netlink.Link) error {
	if err := netlink.LinkSetDown(pod); err != nil {
		return fmt.Errorf("setting %s down: %w", b.Interface(), err)
	}
	addrs, err := netlink.AddrList(pod, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", b.Interface(), err)
	}
	for _, a := range addrs {
		if err := netlink.AddrDel(pod, &a); err != nil {
			return fmt.Errorf("taking %s from %s: %w", a.IPNet, b.Interface(), err)
		}
	}
	if slices.Equal(pod.Attrs().HardwareAddr, b.MAC) {
		mac, err := localMAC()
		if err != nil {
			return err
		}
		if err := netlink.LinkSetHardwareAddr(pod, mac); err != nil {
			return fmt.Errorf("a new MAC for %s: %w", b.Interface(), err)
		}
	}
	if err := netlink.LinkSetMaster(pod, br); err != nil {
		return fmt.Errorf("putting %s on %s: %w", b.Interface(), b.name(), err)
	}
	// A node bridge in hairpin mode (the CNI bridge plugin's hairpinMode,
	// kubenet's) sends the guest's broadcasts back in through the Pod's
	// interface: learning there, the bridge would take the guest's MAC to
	// be outside, and the answers to its ARP would never reach it. As
	// KubeVirt does, the Pod's port does not learn.
	if err := netlink.LinkSetLearning(pod, false); err != nil {
		return fmt.Errorf("turning learning off on %s: %w", b.Interface(), err)
	}
	if err := netlink.LinkSetUp(pod); err != nil {
		return fmt.Errorf("setting %s up: %w", b.Interface(), err)
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
