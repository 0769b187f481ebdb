package podnetwork

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
)

// TunResource is the extended resource every launcher Pod requests, one
// of: the handler's device plugin answers it with /dev/net/tun, which QEMU
// opens the tap through. KubeVirt's name, so quotas written for it apply.
const TunResource = "devices.kubevirt.io/tun"

// MaxInterfaces is how many interfaces a guest gets.
const MaxInterfaces = 8

// PodInterface is the Pod's own interface, which the CNI plugin made.
const PodInterface = "eth0"

// BridgeName is the bridge in the Pod that the guest's tap joins: the
// guest's gateway for masquerade. KubeVirt's name for the first interface.
const BridgeName = "k6t-eth0"

// TapName is the tap of the VMI's interface i on the pod network.
func TapName(i int) string { return fmt.Sprintf("tap%d", i) }

// DefaultMasqueradeCIDR is KubeVirt's network between the guest and its
// launcher Pod when spec.networks[].pod.vmNetworkCIDR is empty.
const DefaultMasqueradeCIDR = "10.0.2.0/24"

// DefaultMasqueradeIPv6CIDR is KubeVirt's IPv6 network between the guest
// and its launcher Pod when spec.networks[].pod.vmIPv6NetworkCIDR is
// empty; it is used where the Pod has an IPv6 address.
const DefaultMasqueradeIPv6CIDR = "fd10:0:2::/120"

// Masquerade are the addresses of a masquerade binding: the gateway (the
// bridge in the Pod) and the guest's, the first two of the network.
type Masquerade struct {
	Gateway, Guest netip.Prefix
}

// MasqueradeAddresses are the gateway and guest addresses in cidr (empty:
// DefaultMasqueradeCIDR), as KubeVirt gives them: .1 and .2. The network
// must be IPv4 and hold at least the two and a broadcast address.
func MasqueradeAddresses(cidr string) (Masquerade, error) {
	if cidr == "" {
		cidr = DefaultMasqueradeCIDR
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return Masquerade{}, fmt.Errorf("vmNetworkCIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	if !p.Addr().Is4() || p.Bits() > 29 {
		return Masquerade{}, fmt.Errorf("vmNetworkCIDR %q: want an IPv4 network of /29 or larger", cidr)
	}
	return firstTwo(p), nil
}

// MasqueradeIPv6Addresses are MasqueradeAddresses for the IPv6 network
// cidr (empty: DefaultMasqueradeIPv6CIDR): ::1 the gateway, ::2 the guest.
func MasqueradeIPv6Addresses(cidr string) (Masquerade, error) {
	if cidr == "" {
		cidr = DefaultMasqueradeIPv6CIDR
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return Masquerade{}, fmt.Errorf("vmIPv6NetworkCIDR %q: %w", cidr, err)
	}
	p = p.Masked()
	if !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() > 126 {
		return Masquerade{}, fmt.Errorf("vmIPv6NetworkCIDR %q: want an IPv6 network of /126 or larger", cidr)
	}
	return firstTwo(p), nil
}

func firstTwo(p netip.Prefix) Masquerade {
	gw := p.Addr().Next()
	return Masquerade{Gateway: netip.PrefixFrom(gw, p.Bits()), Guest: netip.PrefixFrom(gw.Next(), p.Bits())}
}

// MAC is the address of a VMI's interface that names none: stable for the
// VMI (its UID) and interface, in QEMU's range 52:54:00, as libvirt would
// pick one.
func MAC(vmiUID, iface string) net.HardwareAddr {
	sum := sha256.Sum256([]byte(vmiUID + "/" + iface))
	return net.HardwareAddr{0x52, 0x54, 0x00, sum[0], sum[1], sum[2]}
}

// BridgeServerAddress is the address the bridge in the Pod holds for the
// bridge binding (KubeVirt's link-local one): the guest's DHCP server and
// where the launcher reaches the guest from. It never leaves the Pod.
var BridgeServerAddress = netip.MustParseAddr("169.254.75.10")

// Route is a route the guest is handed: to Dest via Via (unspecified: on
// the link).
type Route struct {
	Dest netip.Prefix
	Via  netip.Addr
}
