package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/dhcp"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// TestMasqueradeIPv6: on the dual-stack testbed, a masquerade guest with
// vms.md's IPv6 example (cloud-init network data as KubeVirt's
// documentation writes it) has fd10:0:2::2 behind its launcher Pod's IPv6
// address: a Pod on the other node reaches it there, what it opens comes
// from that address, the launcher's DHCPv6 server offers fd10:0:2::2, the
// VMI reports both of the Pod's addresses, frames
// from another MAC or IPv6 address are dropped in the Pod, and a
// NetworkPolicy denying ingress cuts IPv6 off as it does IPv4.
func TestMasqueradeIPv6(t *testing.T) {
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	ns, podNS := f.Namespace(t), f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	nodes := f.Nodes(t)
	if len(nodes) < 2 {
		t.Skip("needs two nodes")
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "six"}, Spec: framework.GuestVMI(framework.GuestImage, "six")}
	vmi.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodes[0]}
	var doc v1.VirtualMachineInstanceSpec
	if err := yaml.UnmarshalStrict([]byte(docexample.Find(t, "vms-masquerade-ipv6").Body), &doc); err != nil {
		t.Fatal(err)
	}
	vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks = doc.Domain.Devices.Interfaces, doc.Networks
	for i := range vmi.Spec.Volumes {
		if v := &vmi.Spec.Volumes[i]; v.CloudInitNoCloud != nil {
			v.CloudInitNoCloud.NetworkData = doc.Volumes[0].CloudInitNoCloud.NetworkData
		}
	}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi = framework.WaitVMI(t, c, ns, vmi.Name, 4*time.Minute, "runs with its agent and both Pod addresses", func(vmi *v1.VirtualMachineInstance) error {
		if err := framework.AgentConnected(vmi); err != nil {
			return err
		}
		if ifs := vmi.Status.Interfaces; len(ifs) == 0 || len(ifs[0].IPs) != 2 {
			return fmt.Errorf("interfaces %+v", ifs)
		}
		return nil
	})
	podIPs := podIPsOf(t, f, ns, f.LauncherPod(t, vmi).Name)
	podIP6 := ipv6Of(t, podIPs)
	if got := vmi.Status.Interfaces[0].IPs; !slices.Equal(got, podIPs) {
		t.Errorf("VMI interface addresses %v, want the launcher Pod's %v", got, podIPs)
	}
	// KubeVirt's DHCPv6 server in the launcher answers on the bridge with
	// the guest's address (the test guest has no DHCPv6 client: asked
	// from the Pod's side of the bridge).
	if got := askDHCPv6(t, qemuOf(t, domain.Name(vmi))); got != "fd10:0:2::2" {
		t.Errorf("the launcher's DHCPv6 server offered %q, want fd10:0:2::2", got)
	}
	framework.Eventually(t, time.Minute, "the guest has its IPv6 address and route and serves", func() error {
		out := guestShell(t, f, vmi, "mkdir -p /tmp/www && echo six > /tmp/www/index.html && (pidof httpd >/dev/null || httpd -p 8088 -h /tmp/www); ip -6 addr show eth0; ip -6 route")
		for _, want := range []string{"inet6 fd10:0:2::2/120 scope global", "default via fd10:0:2::1"} {
			if !strings.Contains(out, want) || strings.Contains(out, "tentative") {
				return fmt.Errorf("want %q in the guest's (not tentative):\n%s", want, out)
			}
		}
		return nil
	})

	// A Pod on the other node, in a namespace of its own: it serves the
	// guest, and asks the guest's page every second.
	client, logs := webClientPod(t, f, podNS, nodes[1], fmt.Sprintf(`while :; do body=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 %s 8088 2>/dev/null | tail -n 1); echo "guest: ${body:-unreachable}"; sleep 1; done`, podIP6))
	// lastAnswers are the guest's last n answers in the Pod's log.
	lastAnswers := func(n int) []string {
		var out []string
		for _, l := range strings.Split(logs(), "\n") {
			if a, ok := strings.CutPrefix(l, "guest: "); ok {
				out = append(out, a)
			}
		}
		return out[max(0, len(out)-n):]
	}
	framework.Eventually(t, 2*time.Minute, "the Pod reaches the guest at "+podIP6, func() error {
		if got := lastAnswers(1); !slices.Equal(got, []string{"six"}) {
			return fmt.Errorf("last answer %q:\n%s", got, logs())
		}
		return nil
	})
	clientIP6 := ipv6Of(t, podIPsOf(t, f, podNS, client.Name))
	get := `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 ` + clientIP6 + " 8081 | tail -n 1"
	if got := guestShell(t, f, vmi, get); !strings.Contains(got, "from-a-pod") {
		t.Errorf("the guest did not reach the Pod at %s: %q", clientIP6, got)
	}
	framework.Eventually(t, 30*time.Second, "the Pod saw the guest come from its launcher Pod's IPv6 address", func() error {
		if !strings.Contains(logs(), podIP6) {
			return fmt.Errorf("no %s in the Pod's httpd log:\n%s", podIP6, logs())
		}
		return nil
	})

	// Attack: the guest sends as another MAC, then from another IPv6
	// address; the ip6 table in its launcher Pod drops both.
	got, macs, addrs := droppedWhile(t, f, vmi, "mac=$(cat /sys/class/net/eth0/address); ip link set eth0 address 52:54:00:66:66:66 && "+
		get+"; echo spoofed-mac; ip link set eth0 address $mac; "+
		"ip -6 addr add fd10:0:2::99/120 dev eth0 && sleep 2 && ip -6 route replace default via fd10:0:2::1 src fd10:0:2::99 && "+get+"; echo spoofed-address; "+
		"ip -6 route replace default via fd10:0:2::1 src fd10:0:2::2; ip -6 addr del fd10:0:2::99/120 dev eth0")
	t.Logf("spoofing guest: %q; dropped from another MAC %d, from another address %d", got, macs, addrs)
	if strings.Contains(got, "from-a-pod") || !strings.Contains(got, "spoofed-address") || macs == 0 || addrs == 0 {
		t.Errorf("a guest sending IPv6 as another MAC or address: answered %q, dropped %d and %d packets; want no answer and both dropped", got, macs, addrs)
	}

	// A policy denying all ingress to the VM's namespace: the Pod's IPv6
	// connections to the guest stop too.
	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-ingress"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if _, err := f.Kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a policy denying ingress to "+ns+" cuts the Pod's IPv6 connections off", func() error {
		if got := lastAnswers(3); !slices.Equal(got, []string{"unreachable", "unreachable", "unreachable"}) {
			return fmt.Errorf("last answers %q", got)
		}
		return nil
	})
}

// podIPsOf are the addresses Pod ns/name reports, once it reports both
// families' (a running container's status can come before them).
func podIPsOf(t *testing.T, f *framework.Framework, ns, name string) []string {
	t.Helper()
	var out []string
	framework.Eventually(t, 30*time.Second, "Pod "+ns+"/"+name+" reports both its addresses", func() error {
		p, err := f.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		out = nil
		for _, ip := range p.Status.PodIPs {
			out = append(out, ip.IP)
		}
		if len(out) < 2 {
			return fmt.Errorf("addresses %v", out)
		}
		return nil
	})
	return out
}

// ipv6Of is the IPv6 address among addrs, which a dual-stack cluster gives
// every Pod.
func ipv6Of(t *testing.T, addrs []string) string {
	t.Helper()
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is6() {
			return a
		}
	}
	t.Fatalf("addresses %v: no IPv6 one; the testbed is dual-stack", addrs)
	return ""
}

// askDHCPv6 sends a Solicit with rapid commit on the bridge k6t-eth0 in
// the network namespace of process pid (the guest's QEMU, in its launcher
// Pod) and returns the address the Reply's IA_NA holds.
func askDHCPv6(t *testing.T, pid int) string {
	t.Helper()
	type result struct {
		addr string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread enters the Pod's namespace and ends with this
		// goroutine (never unlocked), so no other code runs there.
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		addr, err := solicit6(podnetwork.BridgeName)
		ch <- result{addr, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("DHCPv6 on the launcher Pod's %s: %v", podnetwork.BridgeName, r.err)
	}
	return r.addr
}

func solicit6(ifname string) (string, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return "", err
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", err
	}
	var local net.IP
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsLinkLocalUnicast() {
			local = ipn.IP
		}
	}
	if local == nil {
		return "", fmt.Errorf("%s has no link-local address", ifname)
	}
	conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: local, Port: dhcp.ClientPort6, Zone: ifname})
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	duid := []byte{0, 3, 0, 1, 0x52, 0x54, 0, 0x65, 0x36, 0x36}
	req := &dhcp.Message6{Type: dhcp.Solicit6, XID: [3]byte{6, 6, 6}, Options: []dhcp.Option6{
		{Code: dhcp.Opt6ClientID, Data: duid}, {Code: dhcp.Opt6IANA, Data: make([]byte, 12)}, {Code: dhcp.Opt6RapidCommit},
	}}
	if _, err := conn.WriteTo(req.Marshal(), &net.UDPAddr{IP: dhcp.AllServers6.AsSlice(), Port: dhcp.ServerPort6, Zone: ifname}); err != nil {
		return "", err
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		return "", fmt.Errorf("no answer: %w", err)
	}
	rep, err := dhcp.ParseMessage6(buf[:n])
	if err != nil {
		return "", err
	}
	// IA_NA: IAID, T1, T2, then its options; the first an IAADDR.
	iana := rep.Option(dhcp.Opt6IANA)
	if rep.Type != dhcp.Reply6 || len(iana) < 12+4+16 || iana[13] != byte(dhcp.Opt6IAAddr) {
		return "", fmt.Errorf("reply type %d, IA_NA %x", rep.Type, iana)
	}
	a, _ := netip.AddrFromSlice(iana[16:32])
	return a.String(), nil
}
