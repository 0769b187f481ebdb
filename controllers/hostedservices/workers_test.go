package hostedservices

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func worker(name string, phase kubevirtv1.VirtualMachineInstancePhase, ips ...string) kubevirtv1.VirtualMachineInstance {
	vmi := kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	vmi.Spec.Networks = []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	vmi.Status.Phase, vmi.Status.NodeName = phase, "infra-1"
	if len(ips) > 0 {
		vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: ips[0], IPs: ips}}
	}
	return vmi
}

func node(name string, ready corev1.ConditionStatus, addr string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
	}}
}

func TestWorkers(t *testing.T) {
	secondary := worker("multus", kubevirtv1.Running, "10.1.0.9")
	secondary.Spec.Networks = []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "n"}}}}
	deleting := worker("deleting", kubevirtv1.Running, "10.1.0.8")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	tests := []struct {
		name  string
		vmis  []kubevirtv1.VirtualMachineInstance
		nodes map[string]*corev1.Node
		want  []Worker
	}{
		{name: "running with a Ready node, sorted",
			vmis:  []kubevirtv1.VirtualMachineInstance{worker("w2", kubevirtv1.Running, "10.1.0.3"), worker("w1", kubevirtv1.Running, "10.1.0.2")},
			nodes: map[string]*corev1.Node{"w1": node("w1", corev1.ConditionTrue, "10.1.0.2"), "w2": node("w2", corev1.ConditionTrue, "10.1.0.3")},
			want:  []Worker{{"w1", "10.1.0.2", "infra-1", true}, {"w2", "10.1.0.3", "infra-1", true}}},
		{name: "the address is the VMI's, never the hosted Node's",
			vmis:  []kubevirtv1.VirtualMachineInstance{worker("w1", kubevirtv1.Running, "10.1.0.2")},
			nodes: map[string]*corev1.Node{"w1": node("w1", corev1.ConditionTrue, "10.96.0.1")},
			want:  []Worker{{"w1", "10.1.0.2", "infra-1", true}}},
		{name: "not ready: node NotReady, node missing, VMI not running, VMI deleting",
			vmis: []kubevirtv1.VirtualMachineInstance{worker("a", kubevirtv1.Running, "10.1.0.2"), worker("b", kubevirtv1.Running, "10.1.0.3"),
				worker("c", kubevirtv1.Scheduled, "10.1.0.4"), deleting},
			nodes: map[string]*corev1.Node{"a": node("a", corev1.ConditionFalse, ""), "c": node("c", corev1.ConditionTrue, ""), "deleting": node("deleting", corev1.ConditionTrue, "")},
			want: []Worker{{"a", "10.1.0.2", "infra-1", false}, {"b", "10.1.0.3", "infra-1", false}, {"c", "10.1.0.4", "infra-1", false},
				{"deleting", "10.1.0.8", "infra-1", false}}},
		{name: "IPv4 taken from a dual-stack list; none without an address or a pod network",
			vmis:  []kubevirtv1.VirtualMachineInstance{worker("dual", kubevirtv1.Running, "fd00::5", "10.1.0.5"), worker("none", kubevirtv1.Running), secondary},
			nodes: map[string]*corev1.Node{"dual": node("dual", corev1.ConditionTrue, "")},
			want:  []Worker{{"dual", "10.1.0.5", "infra-1", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Workers(tt.vmis, tt.nodes)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("worker %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
