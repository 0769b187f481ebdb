package podnet

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// cniPod is a Pod namespace as a CNI plugin leaves it: eth0 with
// 10.244.1.7/24, a default route and one more route.
func cniPod(t *testing.T) *os.File {
	t.Helper()
	ns := newPodNamespace(t)
	err := inNamespace(ns, func() error {
		eth0, err := netlink.LinkByName(podnetwork.PodInterface)
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("10.244.1.7/24")
		if err := netlink.AddrAdd(eth0, addr); err != nil {
			return err
		}
		gw := net.ParseIP("10.244.1.1")
		_, svc, _ := net.ParseCIDR("10.96.0.0/12")
		for _, r := range []*netlink.Route{{LinkIndex: eth0.Attrs().Index, Gw: gw}, {LinkIndex: eth0.Attrs().Index, Dst: svc, Gw: gw}} {
			if err := netlink.RouteAdd(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func TestDiscoverPodLink(t *testing.T) {
	ns := cniPod(t)
	pl, err := DiscoverPodLink(ns, podnetwork.PodInterface)
	if err != nil {
		t.Fatal(err)
	}
	want := []podnetwork.Route{{Dest: netip.MustParsePrefix("10.96.0.0/12"), Via: netip.MustParseAddr("10.244.1.1")}}
	if pl.Address.String() != "10.244.1.7/24" || pl.Gateway.String() != "10.244.1.1" || pl.MTU != 1400 || len(pl.Routes) != 1 || pl.Routes[0] != want[0] {
		t.Errorf("pod link %+v", pl)
	}
	if hw, err := net.ParseMAC(pl.MAC); err != nil || len(hw) != 6 {
		t.Errorf("MAC %q: %v", pl.MAC, err)
	}
}

func TestBridgeSetup(t *testing.T) {
	ns := cniPod(t)
	pl, err := DiscoverPodLink(ns, podnetwork.PodInterface)
	if err != nil {
		t.Fatal(err)
	}
	podMAC, _ := net.ParseMAC(pl.MAC)
	b := Bridge{Tap: podnetwork.TapName(0), Owner: 107, Group: 107, MAC: podMAC, Link: pl}
	// Twice: a handler that restarts mid-way runs it again.
	for range 2 {
		if err := b.Setup(ns); err != nil {
			t.Fatal(err)
		}
	}
	err = inNamespace(ns, func() error {
		br, err := netlink.LinkByName(podnetwork.BridgeName)
		if err != nil {
			return err
		}
		eth0, err := netlink.LinkByName(podnetwork.PodInterface)
		if err != nil {
			return err
		}
		if eth0.Attrs().MasterIndex != br.Attrs().Index || eth0.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("eth0: master %d (bridge %d), flags %v", eth0.Attrs().MasterIndex, br.Attrs().Index, eth0.Attrs().Flags)
		}
		if eth0.Attrs().HardwareAddr.String() == pl.MAC {
			t.Error("eth0 kept the MAC the guest took")
		}
		if pi, err := netlink.LinkGetProtinfo(eth0); err != nil || pi.Learning {
			t.Errorf("eth0's port learns (%v): a hairpinning node bridge would lead the guest's own MAC out of it", err)
		}
		if addrs, _ := netlink.AddrList(eth0, netlink.FAMILY_V4); len(addrs) != 0 {
			t.Errorf("eth0 kept %v", addrs)
		}
		addrs, err := netlink.AddrList(br, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || addrs[0].IPNet.String() != "169.254.75.10/32" {
			t.Errorf("bridge addresses %v, want 169.254.75.10/32", addrs)
		}
		tap, err := netlink.LinkByName(podnetwork.TapName(0))
		if err != nil {
			return err
		}
		if tap.Attrs().MasterIndex != br.Attrs().Index || tap.Attrs().MTU != 1400 {
			t.Errorf("tap: master %d, MTU %d", tap.Attrs().MasterIndex, tap.Attrs().MTU)
		}
		routes, err := netlink.RouteGet(net.ParseIP("10.244.1.7"))
		if err != nil {
			return err
		}
		if len(routes) != 1 || routes[0].LinkIndex != br.Attrs().Index || !routes[0].Src.Equal(net.ParseIP("169.254.75.10")) {
			t.Errorf("route to the guest %+v, want on %s from 169.254.75.10", routes, podnetwork.BridgeName)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := familyRuleCounts(t, ns, nftables.TableFamilyBridge); got["antispoof"] != 4 || got["isolate"] != 3 || got["input"] != 2 || got["output"] != 2 {
		t.Errorf("rules per chain %v", got)
	}
	if mac, addr, err := Dropped(ns); err != nil || mac != 0 || addr != 0 {
		t.Errorf("dropped %d, %d, %v: want the counters, at 0", mac, addr, err)
	}
	if again, err := DiscoverPodLink(ns, podnetwork.PodInterface); err != nil || again.Address.IsValid() {
		t.Errorf("the Pod's link read again after the binding took its address: %+v, %v", again, err)
	}
}

// bridgedPod is cniPod with the pod network's bridge binding built.
func bridgedPod(t *testing.T) *os.File {
	t.Helper()
	ns := cniPod(t)
	pod, err := DiscoverPodLink(ns, podnetwork.PodInterface)
	if err != nil {
		t.Fatal(err)
	}
	podMAC, _ := net.ParseMAC(pod.MAC)
	if err := (Bridge{Tap: podnetwork.TapName(0), Owner: 107, Group: 107, MAC: podMAC, Link: pod}).Setup(ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// setupSecondary builds, twice (as a handler restarting mid-way does), the
// bridge binding of the Multus interface iface that DiscoverPodLink read
// as link, for the guest's MAC.
func setupSecondary(t *testing.T, ns *os.File, iface string, mac net.HardwareAddr, link PodLink) Bridge {
	t.Helper()
	b := Bridge{Tap: podnetwork.SecondaryTap(iface), Owner: 107, Group: 107, MAC: mac, PodInterface: iface, Name: podnetwork.SecondaryBridge(iface), Link: link}
	for range 2 {
		if err := b.Setup(ns); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// A Multus network's interface next to the pod network's: bridged at
// layer 2 under its own names, with its own table holding the MAC rule
// only, and the pod network's binding untouched.
func TestSecondaryBridgeSetup(t *testing.T) {
	ns := bridgedPod(t)
	iface := podnetwork.SecondaryInterface("red")
	err := inNamespace(ns, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: iface, MTU: 1450}, PeerName: "peer1"})
	})
	if err != nil {
		t.Fatal(err)
	}
	link, err := DiscoverPodLink(ns, iface)
	if err != nil || link.Address.IsValid() || link.MTU != 1450 {
		t.Fatalf("the Multus interface: %+v, %v; want no address, MTU 1450", link, err)
	}
	guestMAC, _ := net.ParseMAC("02:00:00:00:00:0c")
	b := setupSecondary(t, ns, iface, guestMAC, link)
	err = inNamespace(ns, func() error {
		br, err := netlink.LinkByName(b.Name)
		if err != nil {
			return err
		}
		for _, name := range []string{iface, b.Tap} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if l.Attrs().MasterIndex != br.Attrs().Index || l.Attrs().MTU != 1450 {
				t.Errorf("%s: master %d (bridge %d), MTU %d", name, l.Attrs().MasterIndex, br.Attrs().Index, l.Attrs().MTU)
			}
		}
		if addrs, _ := netlink.AddrList(br, netlink.FAMILY_V4); len(addrs) != 0 {
			t.Errorf("the layer-2 bridge has addresses %v", addrs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	table := TableName + "-" + b.Name
	if got := tableRuleCounts(t, ns, nftables.TableFamilyBridge, table, TableName); len(got) != 1 || got["antispoof"] != 1 {
		t.Errorf("rules of %s per chain %v, want the MAC rule only", table, got)
	}
	if got := tableRuleCounts(t, ns, nftables.TableFamilyBridge, TableName, table); got["antispoof"] != 4 || got["isolate"] != 3 {
		t.Errorf("the pod network's rules per chain %v", got)
	}
	if mac, addr, err := Dropped(ns); err != nil || mac != 0 || addr != 0 {
		t.Errorf("dropped %d, %d, %v", mac, addr, err)
	}
}

// A Multus network whose IPAM gave the Pod's interface an address: that
// address goes to the guest as on the pod network (the DHCP server's
// address on the bridge, the route to the guest, the address rules), in
// the network's own table, while the pod network's binding keeps its own.
func TestSecondaryBridgeWithAddress(t *testing.T) {
	ns := bridgedPod(t)
	iface := podnetwork.SecondaryInterface("blue")
	err := inNamespace(ns, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: iface}, PeerName: "peer2"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName(iface)
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("192.168.78.5/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		_, lab, _ := net.ParseCIDR("172.30.0.0/16")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: lab, Gw: net.ParseIP("192.168.78.1")})
	})
	if err != nil {
		t.Fatal(err)
	}
	link, err := DiscoverPodLink(ns, iface)
	if err != nil {
		t.Fatal(err)
	}
	wantRoute := podnetwork.Route{Dest: netip.MustParsePrefix("172.30.0.0/16"), Via: netip.MustParseAddr("192.168.78.1")}
	if link.Address.String() != "192.168.78.5/24" || link.Gateway.IsValid() || len(link.Routes) != 1 || link.Routes[0] != wantRoute {
		t.Fatalf("the Multus interface %+v: want 192.168.78.5/24, no gateway, the route to 172.30.0.0/16", link)
	}
	guestMAC, _ := net.ParseMAC("02:00:00:00:00:0d")
	b := setupSecondary(t, ns, iface, guestMAC, link)
	err = inNamespace(ns, func() error {
		for _, name := range []string{podnetwork.BridgeName, b.Name} {
			br, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if addrs, _ := netlink.AddrList(br, netlink.FAMILY_V4); len(addrs) != 1 || addrs[0].IPNet.String() != "169.254.75.10/32" {
				t.Errorf("%s addresses %v, want 169.254.75.10/32", name, addrs)
			}
		}
		br, _ := netlink.LinkByName(b.Name)
		routes, err := netlink.RouteGet(net.ParseIP("192.168.78.5"))
		if err != nil {
			return err
		}
		if len(routes) != 1 || routes[0].LinkIndex != br.Attrs().Index {
			t.Errorf("route to the guest's 192.168.78.5 %+v, want on %s", routes, b.Name)
		}
		pod, _ := netlink.LinkByName(iface)
		if addrs, _ := netlink.AddrList(pod, netlink.FAMILY_V4); len(addrs) != 0 {
			t.Errorf("%s kept %v", iface, addrs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	table := TableName + "-" + b.Name
	if got := tableRuleCounts(t, ns, nftables.TableFamilyBridge, table, TableName); got["antispoof"] != 4 || got["isolate"] != 3 || got["input"] != 2 || got["output"] != 2 {
		t.Errorf("rules of %s per chain %v", table, got)
	}
	if got := tableRuleCounts(t, ns, nftables.TableFamilyBridge, TableName, table); got["antispoof"] != 4 || got["isolate"] != 3 {
		t.Errorf("the pod network's rules per chain %v", got)
	}
}
