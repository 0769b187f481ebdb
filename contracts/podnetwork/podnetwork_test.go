package podnetwork

import (
	"strings"
	"testing"
)

func TestMasqueradeAddresses(t *testing.T) {
	v4, v6 := MasqueradeAddresses, MasqueradeIPv6Addresses
	for _, tc := range []struct {
		addresses                 func(string) (Masquerade, error)
		cidr, gateway, guest, err string
	}{
		{addresses: v4, cidr: "", gateway: "10.0.2.1/24", guest: "10.0.2.2/24"},
		{addresses: v4, cidr: "10.11.12.0/24", gateway: "10.11.12.1/24", guest: "10.11.12.2/24"},
		{addresses: v4, cidr: "192.168.7.9/28", gateway: "192.168.7.1/28", guest: "192.168.7.2/28"},
		{addresses: v4, cidr: "10.0.0.0/30", err: `vmNetworkCIDR "10.0.0.0/30": want an IPv4 network of /29 or larger`},
		{addresses: v4, cidr: "fd10:0:2::/120", err: `vmNetworkCIDR "fd10:0:2::/120": want an IPv4 network of /29 or larger`},
		{addresses: v4, cidr: "ten", err: `vmNetworkCIDR "ten": netip.ParsePrefix("ten"): no '/'`},
		{addresses: v6, cidr: "", gateway: "fd10:0:2::1/120", guest: "fd10:0:2::2/120"},
		{addresses: v6, cidr: "fd20::5/64", gateway: "fd20::1/64", guest: "fd20::2/64"},
		{addresses: v6, cidr: "fd10::/127", err: `vmIPv6NetworkCIDR "fd10::/127": want an IPv6 network of /126 or larger`},
		{addresses: v6, cidr: "10.0.2.0/24", err: `vmIPv6NetworkCIDR "10.0.2.0/24": want an IPv6 network of /126 or larger`},
		{addresses: v6, cidr: "::ffff:10.0.2.0/120", err: `vmIPv6NetworkCIDR "::ffff:10.0.2.0/120": want an IPv6 network of /126 or larger`},
		{addresses: v6, cidr: "fd10::", err: `vmIPv6NetworkCIDR "fd10::": netip.ParsePrefix("fd10::"): no '/'`},
	} {
		m, err := tc.addresses(tc.cidr)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: error %v, want %s", tc.cidr, err, tc.err)
			}
			continue
		}
		if err != nil || m.Gateway.String() != tc.gateway || m.Guest.String() != tc.guest {
			t.Errorf("%q: %v %v %v, want %s %s", tc.cidr, m.Gateway, m.Guest, err, tc.gateway, tc.guest)
		}
	}
}

func TestMACIsStableAndLocalToQEMU(t *testing.T) {
	a, b := MAC("uid-1", "default"), MAC("uid-1", "default")
	if a.String() != b.String() || a.String()[:9] != "52:54:00:" {
		t.Fatalf("MAC %s then %s", a, b)
	}
	if MAC("uid-1", "default").String() == MAC("uid-2", "default").String() || MAC("uid-1", "a").String() == MAC("uid-1", "b").String() {
		t.Fatal("different VMIs or interfaces got the same MAC")
	}
}

// KubeVirt's names for the networks "red" and "green", as its own tests
// spell them: a Pod's network-status must read the same.
func TestSecondaryNamesAreKubeVirts(t *testing.T) {
	for _, tc := range []struct{ network, iface, bridge, tap string }{
		{network: "red", iface: "podb1f51a511f1", bridge: "k6t-b1f51a511f1", tap: "tapb1f51a511f1"},
		{network: "green", iface: "podba4788b226a", bridge: "k6t-ba4788b226a", tap: "tapba4788b226a"},
	} {
		iface := SecondaryInterface(tc.network)
		if iface != tc.iface || SecondaryBridge(iface) != tc.bridge || SecondaryTap(iface) != tc.tap {
			t.Errorf("%s: %s %s %s, want %s %s %s", tc.network, iface, SecondaryBridge(iface), SecondaryTap(iface), tc.iface, tc.bridge, tc.tap)
		}
	}
}

func TestNetworkAttachment(t *testing.T) {
	for _, tc := range []struct{ networkName, ns, name, err string }{
		{networkName: "blue", ns: "own", name: "blue"},
		{networkName: "other/blue", ns: "other", name: "blue"},
		{networkName: "Other/blue", err: `networkName "Other/blue": namespace "Other": a lowercase RFC 1123 label`},
		{networkName: "a/b/c", err: `networkName "a/b/c": name "b/c": a lowercase RFC 1123 subdomain`},
		{networkName: "", err: `networkName "": name "": a lowercase RFC 1123 subdomain`},
	} {
		ns, name, err := NetworkAttachment(tc.networkName, "own")
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %s...", tc.networkName, err, tc.err)
			}
			continue
		}
		if err != nil || ns != tc.ns || name != tc.name {
			t.Errorf("%q: %s/%s %v, want %s/%s", tc.networkName, ns, name, err, tc.ns, tc.name)
		}
	}
}
