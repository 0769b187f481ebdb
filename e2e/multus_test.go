package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/vishvananda/netlink"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// lanVM is a guest VM on node with the interfaces and networks vms.md
// gives it: KubeVirt's default interface and a second one, "lan", on the
// Multus network nad (bridge binding); only the default one when nad is
// empty.
func lanVM(t *testing.T, ns, name, nad, node string) *v1.VirtualMachine {
	t.Helper()
	vm := framework.GuestVM(ns, name, framework.GuestImage, v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	if nad != "" {
		var doc v1.VirtualMachineInstanceSpec
		if err := yaml.UnmarshalStrict([]byte(docexample.Find(t, "vms-multus-template").With(t, "networkName: lan", "networkName: "+nad).Body), &doc); err != nil {
			t.Fatal(err)
		}
		spec.Domain.Devices.Interfaces, spec.Networks = doc.Domain.Devices.Interfaces, doc.Networks
	}
	return vm
}

// TestMultusBridgeNetwork: two VMs on a secondary network (a
// NetworkAttachmentDefinition of the bridge CNI plugin, no IPAM; Multus and
// the plugin deployed by the operator) reach each other there at the
// addresses their guests give themselves, a VM not attached to it does
// not reach them, the VMIs report the interface as KubeVirt's do, and a
// guest sending there as another MAC is dropped in its launcher Pod. The
// two are also on a network with IPAM, whose addresses their guests get
// by DHCP (checkLabNetwork).
func TestMultusBridgeNetwork(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	node := f.Nodes(t)[0]
	// A bridge on the node named for this namespace; the plugin makes it
	// and never removes it.
	bridge := "tv" + strings.TrimPrefix(podnetwork.SecondaryInterface(ns), "pod")
	t.Cleanup(func() { deleteHostLink(bridge) })
	// The network as vms.md writes it.
	mustRunExample(t, f, docexample.Find(t, "vms-multus-network").With(t, "kubectl apply", "kubectl -n "+ns+" apply").With(t, "br-lan", bridge), t.TempDir(), nil)
	// And one whose IPAM gives addresses, as vms.md writes it.
	labBridge := "tw" + strings.TrimPrefix(podnetwork.SecondaryInterface(ns), "pod")
	t.Cleanup(func() { deleteHostLink(labBridge) })
	mustRunExample(t, f, docexample.Find(t, "vms-multus-ipam-network").With(t, "kubectl apply", "kubectl -n "+ns+" apply").With(t, "br-lab", labBridge), t.TempDir(), nil)
	a, b := lanVM(t, ns, "a", "lan", node), lanVM(t, ns, "b", "lan", node)
	for _, vm := range []*v1.VirtualMachine{a, b} {
		spec := &vm.Spec.Template.Spec
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, v1.Interface{Name: "lab", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}})
		spec.Networks = append(spec.Networks, v1.Network{Name: "lab", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "lab"}}})
	}
	vms := map[string]*v1.VirtualMachine{}
	for _, vm := range []*v1.VirtualMachine{a, b, lanVM(t, ns, "c", "", node)} {
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		vms[vm.Name] = vm
	}
	vmis := map[string]*v1.VirtualMachineInstance{}
	for name := range vms {
		vmis[name] = framework.WaitVMI(t, c, ns, name, 4*time.Minute, "runs with its agent", framework.AgentConnected)
	}

	// The MAC pool gave "lan" its MAC, which the guest's eth1 has.
	stored := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, stored); err != nil {
		t.Fatal(err)
	}
	lanMAC := stored.Spec.Template.Spec.Domain.Devices.Interfaces[1].MacAddress
	if got := strings.TrimSpace(guestShell(t, f, vmis["a"], "cat /sys/class/net/eth1/address")); lanMAC == "" || got != strings.ToLower(lanMAC) {
		t.Errorf("guest a's eth1 has MAC %q; the VM's lan interface %q", got, lanMAC)
	}
	// Multus attached the network under KubeVirt's name for it.
	pod := f.LauncherPod(t, vmis["a"])
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(pod.Annotations[podnetwork.NetworkStatusAnnotation]), &statuses); err != nil {
		t.Fatalf("launcher Pod network-status %q: %v", pod.Annotations[podnetwork.NetworkStatusAnnotation], err)
	}
	found := false
	for _, s := range statuses {
		found = found || s.Name == ns+"/lan" && s.Interface == podnetwork.SecondaryInterface("lan")
	}
	if !found {
		t.Errorf("launcher Pod network-status %+v: no %s/lan on %s", statuses, ns, podnetwork.SecondaryInterface("lan"))
	}

	for name, addr := range map[string]string{"a": "192.168.77.1/24", "b": "192.168.77.2/24"} {
		guestShell(t, f, vmis[name], "ip addr add "+addr+" dev eth1 && ip link set eth1 up")
	}
	guestShell(t, f, vmis["b"], "mkdir -p /tmp/lan && echo on-the-lan > /tmp/lan/index.html && httpd -p 8088 -h /tmp/lan")
	get := guestGet("192.168.77.2", 5)
	framework.Eventually(t, 30*time.Second, "a reaches b on the lan", func() error {
		if got := guestShell(t, f, vmis["a"], get); !strings.Contains(got, "on-the-lan") {
			return fmt.Errorf("a got %q; a: %s; b: %s", got, guestShell(t, f, vmis["a"], "ip addr show eth1; cat /proc/net/arp"), guestShell(t, f, vmis["b"], "ip addr show eth1; cat /proc/net/arp; netstat -ltn"))
		}
		return nil
	})
	if got := guestShell(t, f, vmis["c"], get); strings.Contains(got, "on-the-lan") {
		t.Errorf("c, not on the lan, reached b there: %q", got)
	}
	framework.WaitVMI(t, c, ns, "a", time.Minute, "reports eth1 on lan", func(vmi *v1.VirtualMachineInstance) error {
		for _, i := range vmi.Status.Interfaces {
			if i.Name == "lan" && i.InterfaceName == "eth1" && i.IP == "192.168.77.1" && i.PodInterfaceName == podnetwork.SecondaryInterface("lan") {
				return nil
			}
		}
		return fmt.Errorf("interfaces %+v", vmi.Status.Interfaces)
	})

	checkLabNetwork(t, f, ns, vmis["a"], vmis["b"])

	// Attack: a sends on the lan as another MAC; its launcher Pod drops it.
	got, macs, _ := droppedWhile(t, f, vmis["a"], "ip link set eth1 address 02:66:66:66:66:66 && "+get+"; ip link set eth1 address "+strings.ToLower(lanMAC))
	if strings.Contains(got, "on-the-lan") || macs == 0 {
		t.Errorf("a as another MAC on the lan: got %q, %d frames dropped; want no answer and frames dropped", got, macs)
	}
}

// checkLabNetwork: the "lab" network's IPAM gave the launcher Pods of a
// and b addresses, which their guests' DHCP client gets on the third NIC
// (the pod network's default route and DNS kept), and a reaches b there;
// a guest taking another address there is dropped in its launcher Pod.
func checkLabNetwork(t *testing.T, f *framework.Framework, ns string, a, b *v1.VirtualMachineInstance) {
	t.Helper()
	const dhcp = "udhcpc -i eth2 -t 5 -T 1 -q -n -s /etc/udhcpc.script >/dev/null 2>&1"
	const kept = "ip route | grep ^default; cat /etc/resolv.conf"
	addr := map[string]string{}
	for _, vmi := range []*v1.VirtualMachineInstance{a, b} {
		want := networkStatusIP(t, f.LauncherPod(t, vmi), ns+"/lab")
		before := guestShell(t, f, vmi, kept)
		if got := guestShell(t, f, vmi, dhcp+"; ip -4 -o addr show eth2"); !strings.Contains(got, "inet "+want+"/24") {
			t.Fatalf("%s's eth2 after DHCP: %q; its launcher Pod had %s on lab", vmi.Name, got, want)
		}
		if after := guestShell(t, f, vmi, kept); after != before {
			t.Errorf("%s's default route and DNS changed with the lab lease: %q, before %q", vmi.Name, after, before)
		}
		addr[vmi.Name] = want
	}
	get := guestGet(addr["b"], 5)
	framework.Eventually(t, 30*time.Second, "a reaches b on lab", func() error {
		if got := guestShell(t, f, a, get); !strings.Contains(got, "on-the-lan") {
			return fmt.Errorf("a got %q", got)
		}
		return nil
	})
	framework.WaitVMI(t, f.VMClient(t), ns, "a", time.Minute, "reports eth2 on lab", func(vmi *v1.VirtualMachineInstance) error {
		for _, i := range vmi.Status.Interfaces {
			if i.Name == "lab" && i.InterfaceName == "eth2" && i.IP == addr["a"] && i.PodInterfaceName == podnetwork.SecondaryInterface("lab") {
				return nil
			}
		}
		return fmt.Errorf("interfaces %+v", vmi.Status.Interfaces)
	})

	// Attack: a takes another address of lab's subnet.
	got, _, addrs := droppedWhile(t, f, a, "ip addr flush dev eth2 && ip addr add 192.168.78.99/24 dev eth2 && "+get+"; ip addr flush dev eth2; ip addr add "+addr["a"]+"/24 dev eth2")
	if strings.Contains(got, "on-the-lan") || addrs == 0 {
		t.Errorf("a as 192.168.78.99 on lab: got %q, %d packets dropped; want no answer and packets dropped", got, addrs)
	}
}

// networkStatusIP is the address Multus reports for network (ns/name) in
// pod's network-status.
func networkStatusIP(t *testing.T, pod *corev1.Pod, network string) string {
	t.Helper()
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(pod.Annotations[podnetwork.NetworkStatusAnnotation]), &statuses); err != nil {
		t.Fatalf("launcher Pod %s network-status: %v", pod.Name, err)
	}
	for _, s := range statuses {
		if s.Name == network && len(s.IPs) == 1 {
			return s.IPs[0]
		}
	}
	t.Fatalf("launcher Pod %s network-status %+v: no one address on %s", pod.Name, statuses, network)
	return ""
}

// TestAttackNetworkAttachments: a VM may name only a
// NetworkAttachmentDefinition of its own namespace that its author may
// read; a missing one is named on the VMI.
func TestAttackNetworkAttachments(t *testing.T) {
	f := framework.New(t)
	ns, other := f.Namespace(t), f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	node := f.Nodes(t)[0]
	for _, n := range []string{ns, other} {
		nad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": nadv1.SchemeGroupVersion.String(), "kind": "NetworkAttachmentDefinition",
			"metadata": map[string]any{"namespace": n, "name": "lan"},
			"spec":     map[string]any{"config": `{"cniVersion":"0.3.1","name":"lan","type":"bridge","bridge":"tvattack"}`},
		}}
		if err := c.Create(ctx, nad); err != nil {
			t.Fatal(err)
		}
	}
	tenant := userClient(t, f, ns, "e2e-tenant")
	err := tenant.Create(ctx, lanVM(t, ns, "across", other+"/lan", node))
	if err == nil || !strings.Contains(err.Error(), "spec.template.spec.networks[1].multus.networkName") || !strings.Contains(err.Error(), "another namespace") {
		t.Errorf("a VM on another namespace's network: %v, want refused naming the field", err)
	}
	// A user who may create VMs but not read the namespace's
	// NetworkAttachmentDefinitions.
	vmOnly := roleClient(t, f, ns, "e2e-vm-only", []rbacv1.PolicyRule{{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"create", "get"}}})
	err = vmOnly.Create(ctx, lanVM(t, ns, "unread", "lan", node))
	if err == nil || !strings.Contains(err.Error(), "may not get NetworkAttachmentDefinition "+ns+"/lan") {
		t.Errorf("a VM on a network its author may not read: %v, want refused naming it", err)
	}
	// The tenant's own: admitted; one missing: named on the VMI.
	if err := tenant.Create(ctx, lanVM(t, ns, "missing", "nowhere", node)); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, "missing", time.Minute, "says its network is missing", func(vmi *v1.VirtualMachineInstance) error {
		for _, cond := range vmi.Status.Conditions {
			if cond.Type == v1.VirtualMachineInstanceSynchronized && strings.Contains(cond.Message, "network attachment definition "+ns+"/nowhere") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", vmi.Status.Conditions)
	})
}

// roleClient is a client acting as user, who has only rules in ns.
func roleClient(t *testing.T, f *framework.Framework, ns, user string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	if _, err := f.Kube.RbacV1().Roles(ns).Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := rules[0]
	return boundClient(t, f, ns, user, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		&authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]})
}

// deleteHostLink removes the link name from this machine's network
// namespace (the first node's), if it is there.
func deleteHostLink(name string) {
	if l, err := netlink.LinkByName(name); err == nil {
		_ = netlink.LinkDel(l)
	}
}
