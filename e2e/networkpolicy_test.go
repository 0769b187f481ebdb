package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestAttackNetworkPolicyAppliesToVMs: a VM's traffic passes its launcher
// Pod's interface, so NetworkPolicies apply to VMs as to Pods. A VM in
// namespace a reaches a VM in b on the other node; a policy in b denying
// all ingress cuts it off; one allowing namespace a lets it through again.
func TestAttackNetworkPolicyAppliesToVMs(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs: see "Parallel" in doc.go
	f := framework.New(t)
	nsA, nsB := f.Namespace(t), f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	nodes := f.Nodes(t)
	if len(nodes) < 2 {
		t.Skip("needs two nodes")
	}
	vms := map[string]*v1.VirtualMachine{
		"client": framework.GuestVM(nsA, "client", framework.GuestImage, v1.RunStrategyAlways),
		"server": framework.GuestVM(nsB, "server", framework.GuestImage, v1.RunStrategyAlways),
	}
	vms["client"].Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodes[0]}
	vms["server"].Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodes[1]}
	for _, vm := range vms {
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	client := framework.WaitVMI(t, c, nsA, "client", 4*time.Minute, "runs with its agent", framework.AgentConnected)
	server := framework.WaitVMI(t, c, nsB, "server", 4*time.Minute, "runs with its agent and its Pod IP", func(vmi *v1.VirtualMachineInstance) error {
		if err := framework.AgentConnected(vmi); err != nil {
			return err
		}
		if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
			return fmt.Errorf("interfaces %+v", vmi.Status.Interfaces)
		}
		return nil
	})
	guestShell(t, f, server, "mkdir -p /tmp/www && echo behind-the-policy > /tmp/www/index.html && httpd -p 8088 -h /tmp/www")
	get := guestGet(server.Status.Interfaces[0].IP, 3)
	reaches := func() error {
		if got := guestShell(t, f, client, get); !strings.Contains(got, "behind-the-policy") {
			return fmt.Errorf("client got %q", got)
		}
		return nil
	}
	framework.Eventually(t, time.Minute, "the client VM reaches the server VM with no policy", reaches)

	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "ingress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	policies := f.Kube.NetworkingV1().NetworkPolicies(nsB)
	policy, err := policies.Create(ctx, policy, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a policy denying ingress to "+nsB+" cuts the client VM off", func() error {
		if got := guestShell(t, f, client, get); !strings.Contains(got, "unreachable") {
			return fmt.Errorf("client got %q", got)
		}
		return nil
	})
	// And it stays cut off: not a lost packet.
	for range 3 {
		if got := guestShell(t, f, client, get); !strings.Contains(got, "unreachable") {
			t.Fatalf("denied, the client got %q", got)
		}
	}

	policy.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsA},
		}}},
	}}
	if _, err := policies.Update(ctx, policy, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a policy allowing "+nsA+" lets the client VM through", reaches)
}
