package podnet

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// newPodNamespace is a fresh network namespace with an eth0 of MTU 1400
// (one end of a veth pair), as a CNI plugin leaves a Pod's; it needs root.
func newPodNamespace(t *testing.T) *os.File {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer own.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		// Back, so that no thread (the main one is never ended) stays in it.
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err} // the thread ends with this goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- result{f, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.f.Close() })
	err := inNamespace(r.f, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: podnetwork.PodInterface, MTU: 1400}, PeerName: "peer0"}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		l, err := netlink.LinkByName(podnetwork.PodInterface)
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.f
}

func binding(t *testing.T, ports ...Port) Masquerade {
	addrs, err := podnetwork.MasqueradeAddresses("")
	if err != nil {
		t.Fatal(err)
	}
	addrs6, err := podnetwork.MasqueradeIPv6Addresses("")
	if err != nil {
		t.Fatal(err)
	}
	return Masquerade{Tap: podnetwork.TapName(0), Owner: 107, Group: 107, MAC: podnetwork.MAC("uid", "default"), Addresses: addrs, IPv6: addrs6, Ports: ports}
}

func TestMasqueradeSetup(t *testing.T) {
	ns := newPodNamespace(t)
	m := binding(t)
	// Twice: a handler that restarts mid-way runs it again.
	for range 2 {
		if ipv6, err := m.Setup(ns); err != nil || ipv6 {
			t.Fatalf("setup: IPv6 %v, %v; want IPv4 only (the Pod has no IPv6 address)", ipv6, err)
		}
	}
	err := inNamespace(ns, func() error {
		br, err := netlink.LinkByName(podnetwork.BridgeName)
		if err != nil {
			return err
		}
		if br.Type() != "bridge" || br.Attrs().MTU != 1400 || br.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("bridge %s: type %s MTU %d flags %v", podnetwork.BridgeName, br.Type(), br.Attrs().MTU, br.Attrs().Flags)
		}
		addrs, err := netlink.AddrList(br, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if len(addrs) != 1 || addrs[0].IPNet.String() != "10.0.2.1/24" {
			t.Errorf("bridge addresses %v, want 10.0.2.1/24 once", addrs)
		}
		tap, err := netlink.LinkByName(podnetwork.TapName(0))
		if err != nil {
			return err
		}
		if tap.Attrs().MasterIndex != br.Attrs().Index || tap.Attrs().MTU != 1400 {
			t.Errorf("tap: master %d (bridge %d), MTU %d", tap.Attrs().MasterIndex, br.Attrs().Index, tap.Attrs().MTU)
		}
		if tt, ok := tap.(*netlink.Tuntap); !ok || tt.Owner != 107 || tt.Group != 107 || tt.Mode != netlink.TUNTAP_MODE_TAP {
			t.Errorf("tap %#v: want a tap owned by 107:107", tap)
		}
		for name, want := range map[string]string{"net/ipv4/ip_forward": "1"} {
			got, err := os.ReadFile(filepath.Join("/proc/sys", name))
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(got)) != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ruleCounts(t, ns); got["antispoof"] != 2 || got["inbound"] != 2 || got["outbound"] != 1 {
		t.Errorf("rules per chain %v, want antispoof 2, inbound 2 (tcp, udp), outbound 1", got)
	}
	if got := familyRuleCounts(t, ns, nftables.TableFamilyIPv6); len(got) != 0 {
		t.Errorf("IPv6 rules %v in a Pod without IPv6", got)
	}
	if mac, addr, err := Dropped(ns); err != nil || mac != 0 || addr != 0 {
		t.Errorf("dropped %d, %d, %v: want the two counters, at 0", mac, addr, err)
	}
}

// A Pod of a dual-stack cluster: the guest's IPv6 network beside the
// IPv4 one, and its rules in an ip6 table; gone again once the Pod has no
// IPv6 address.
func TestMasqueradeIPv6(t *testing.T) {
	ns := newPodNamespace(t)
	podAddr := "fd00:10:244::9/64"
	setPodIPv6 := func(add bool) {
		t.Helper()
		err := inNamespace(ns, func() error {
			eth0, err := netlink.LinkByName(podnetwork.PodInterface)
			if err != nil {
				return err
			}
			a, err := netlink.ParseAddr(podAddr)
			if err != nil {
				return err
			}
			a.Flags = unix.IFA_F_NODAD
			if add {
				return netlink.AddrAdd(eth0, a)
			}
			return netlink.AddrDel(eth0, a)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setPodIPv6(true)
	m := binding(t, Port{Protocol: "tcp", Port: 22})
	for range 2 {
		if ipv6, err := m.Setup(ns); err != nil || !ipv6 {
			t.Fatalf("setup: IPv6 %v, %v; want IPv6 built", ipv6, err)
		}
	}
	err := inNamespace(ns, func() error {
		br, err := netlink.LinkByName(podnetwork.BridgeName)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(br, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		var global []string
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() {
				global = append(global, a.IPNet.String())
				if a.Flags&unix.IFA_F_TENTATIVE != 0 {
					t.Errorf("%s is tentative: the guest could not reach its gateway yet", a.IPNet)
				}
			}
		}
		if !slices.Equal(global, []string{"fd10:0:2::1/120"}) {
			t.Errorf("bridge IPv6 addresses %v, want fd10:0:2::1/120", global)
		}
		got, err := os.ReadFile("/proc/sys/net/ipv6/conf/all/forwarding")
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(got)) != "1" {
			t.Errorf("IPv6 forwarding %s, want 1", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for family, name := range map[nftables.TableFamily]string{nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6"} {
		if got := familyRuleCounts(t, ns, family); got["antispoof"] != 2 || got["inbound"] != 1 || got["outbound"] != 1 {
			t.Errorf("%s rules per chain %v, want antispoof 2, inbound 1 (tcp/22), outbound 1", name, got)
		}
	}
	setPodIPv6(false)
	if ipv6, err := m.Setup(ns); err != nil || ipv6 {
		t.Fatalf("setup without the Pod's IPv6 address: IPv6 %v, %v", ipv6, err)
	}
	if got := familyRuleCounts(t, ns, nftables.TableFamilyIPv6); len(got) != 0 {
		t.Errorf("IPv6 rules %v left once the Pod has no IPv6 address", got)
	}
}

func TestMasqueradeOnlyListedPorts(t *testing.T) {
	ns := newPodNamespace(t)
	if _, err := binding(t, Port{Protocol: "tcp", Port: 22}, Port{Protocol: "tcp", Port: 80}, Port{Protocol: "udp", Port: 53}).Setup(ns); err != nil {
		t.Fatal(err)
	}
	if got := ruleCounts(t, ns); got["inbound"] != 3 {
		t.Errorf("inbound rules %d, want one per port (3)", got["inbound"])
	}
}

func ruleCounts(t *testing.T, ns *os.File) map[string]int {
	return familyRuleCounts(t, ns, nftables.TableFamilyIPv4)
}

func familyRuleCounts(t *testing.T, ns *os.File, family nftables.TableFamily) map[string]int {
	t.Helper()
	return tableRuleCounts(t, ns, family, TableName)
}

// tableRuleCounts counts the rules per chain of family's table, and fails
// on a chain of family in a table that is not one of also.
func tableRuleCounts(t *testing.T, ns *os.File, family nftables.TableFamily, table string, also ...string) map[string]int {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	chains, err := c.ListChainsOfTableFamily(family)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ch := range chains {
		if ch.Table.Name != table {
			if !slices.Contains(also, ch.Table.Name) {
				t.Errorf("chain %s in table %s", ch.Name, ch.Table.Name)
			}
			continue
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			t.Fatal(err)
		}
		out[ch.Name] = len(rules)
	}
	return out
}

func TestSetupRefusesTheNodesNamespace(t *testing.T) {
	for name, path := range map[string]string{
		"the caller's own network namespace": "/proc/self/ns/net",
		"a UTS namespace":                    "/proc/self/ns/uts",
		"a plain file":                       os.Args[0],
	} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := binding(t).Setup(f); !errors.Is(err, ErrNotPodNamespace) {
			t.Errorf("%s: %v, want ErrNotPodNamespace", name, err)
		}
		f.Close()
	}
}
