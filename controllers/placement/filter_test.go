package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
)

func node(name string, mut ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
			},
		},
	}
	for _, m := range mut {
		m(n)
	}
	return n
}

func vmi(name, mem string, mut ...func(*v1.VirtualMachineInstance)) *v1.VirtualMachineInstance {
	v := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{launcherpod.Annotation: "false"}}, // placed the old way
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}},
		}},
	}
	for _, m := range mut {
		m(v)
	}
	return v
}

func on(n string, v *v1.VirtualMachineInstance) *v1.VirtualMachineInstance {
	v.Status.NodeName = n
	return v
}

func TestPlace(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	tests := []struct {
		name     string
		vmi      *v1.VirtualMachineInstance
		nodes    []*corev1.Node
		placed   []*v1.VirtualMachineInstance
		want     string
		wantMsgs []string
	}{
		{name: "emptiest node wins", vmi: vmi("a", "1Gi"), nodes: []*corev1.Node{node("n1"), node("n2")},
			placed: []*v1.VirtualMachineInstance{on("n1", vmi("x", "2Gi"))}, want: "n2"},
		{name: "tie broken by name", vmi: vmi("a", "1Gi"), nodes: []*corev1.Node{node("n2"), node("n1")}, want: "n1"},
		{name: "not ready and cordoned nodes skipped", vmi: vmi("a", "1Gi"), nodes: []*corev1.Node{
			node("n1", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
			node("n2", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
		}, wantMsgs: []string{"0/2 nodes are available", "1 node(s) were not ready", "1 node(s) were unschedulable"}},
		{name: "taint needs a toleration", vmi: vmi("a", "1Gi"), nodes: []*corev1.Node{
			node("n1", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "vm", Effect: corev1.TaintEffectNoSchedule}}
			}),
		}, wantMsgs: []string{"1 node(s) had untolerated taint(s)"}},
		{name: "toleration admits", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vm", Effect: corev1.TaintEffectNoSchedule}}
		}), nodes: []*corev1.Node{node("n1", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "vm", Effect: corev1.TaintEffectNoSchedule}}
		})}, want: "n1"},
		{name: "nodeSelector", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "n2"}
		}), nodes: []*corev1.Node{node("n1"), node("n2")}, want: "n2"},
		{name: "required affinity unmet", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}},
			}}}
		}), nodes: []*corev1.Node{node("n1")}, wantMsgs: []string{"1 node(s) didn't match node selector or affinity"}},
		{name: "preferred affinity outweighs free memory", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}},
			}}}}
		}), nodes: []*corev1.Node{node("n1"), node("n2")}, placed: []*v1.VirtualMachineInstance{on("n1", vmi("x", "1Gi"))}, want: "n1"},
		{name: "memory counted over placed VMIs", vmi: vmi("a", "2Gi"), nodes: []*corev1.Node{node("n1")},
			placed: []*v1.VirtualMachineInstance{on("n1", vmi("x", "3Gi"))}, wantMsgs: []string{"1 Insufficient memory"}},
		{name: "memory.guest stands in for a request", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.Domain.Resources.Requests = nil
			q := resource.MustParse("8Gi")
			v.Spec.Domain.Memory = &v1.Memory{Guest: &q}
		}), nodes: []*corev1.Node{node("n1")}, wantMsgs: []string{"1 Insufficient memory"}},
		{name: "extended resource", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.Domain.Resources.Requests[gpu] = resource.MustParse("1")
		}), nodes: []*corev1.Node{node("n1"), node("n2", func(n *corev1.Node) { n.Status.Allocatable[gpu] = resource.MustParse("1") })}, want: "n2"},
		{name: "topology spread", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			}}
		}), nodes: []*corev1.Node{node("n1"), node("n2", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse("64Gi") })},
			placed: []*v1.VirtualMachineInstance{on("n2", vmi("x", "1Gi"))}, want: "n1"},
		{name: "topology spread unsatisfiable", vmi: vmi("a", "1Gi", func(v *v1.VirtualMachineInstance) {
			v.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			}}
		}), nodes: []*corev1.Node{node("n1")}, wantMsgs: []string{"1 node(s) didn't match topology spread constraints"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Place(tt.vmi, tt.nodes, tt.placed)
			if err != nil {
				t.Fatal(err)
			}
			if d.Node != tt.want {
				t.Fatalf("node = %q (%s), want %q", d.Node, d.Message, tt.want)
			}
			for _, m := range tt.wantMsgs {
				if !strings.Contains(d.Message, m) {
					t.Errorf("message %q lacks %q", d.Message, m)
				}
			}
		})
	}
}
