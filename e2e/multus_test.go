package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/vishvananda/netlink"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/podnet"
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
// guest sending there as another MAC is dropped in its launcher Pod.
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
	vms := map[string]*v1.VirtualMachine{}
	for _, vm := range []*v1.VirtualMachine{lanVM(t, ns, "a", "lan", node), lanVM(t, ns, "b", "lan", node), lanVM(t, ns, "c", "", node)} {
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
	get := `body=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 192.168.77.2 8088 | tail -n 1); echo "${body:-unreachable}"`
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

	// Attack: a sends on the lan as another MAC; its launcher Pod drops it.
	ns0, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", qemuOf(t, domain.Name(vmis["a"]))))
	if err != nil {
		t.Fatal(err)
	}
	defer ns0.Close()
	mac0, _, err := podnet.Dropped(ns0)
	if err != nil {
		t.Fatal(err)
	}
	got := guestShell(t, f, vmis["a"], "ip link set eth1 address 02:66:66:66:66:66 && "+get+"; ip link set eth1 address "+strings.ToLower(lanMAC))
	mac1, _, err := podnet.Dropped(ns0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "on-the-lan") || mac1 == mac0 {
		t.Errorf("a as another MAC on the lan: got %q, %d frames dropped; want no answer and frames dropped", got, mac1-mac0)
	}
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
