package hyperconverged

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestDefaultEvictionStrategy(t *testing.T) {
	worker := corev1.Node{}
	cordoned := corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}
	tainted := corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}}
	preferred := corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}}}
	booting := corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}}}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		want  kubevirtv1.EvictionStrategy
	}{
		{name: "no nodes", want: kubevirtv1.EvictionStrategyNone},
		{name: "a single node", nodes: []corev1.Node{worker}, want: kubevirtv1.EvictionStrategyNone},
		{name: "two workers", nodes: []corev1.Node{worker, worker}, want: kubevirtv1.EvictionStrategyLiveMigrate},
		{name: "one worker, a control plane and a cordoned node", nodes: []corev1.Node{worker, tainted, cordoned}, want: kubevirtv1.EvictionStrategyNone},
		{name: "a node still booting counts", nodes: []corev1.Node{worker, booting}, want: kubevirtv1.EvictionStrategyLiveMigrate},
		{name: "a PreferNoSchedule taint still counts", nodes: []corev1.Node{worker, preferred}, want: kubevirtv1.EvictionStrategyLiveMigrate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefaultEvictionStrategy(tc.nodes); got != tc.want {
				t.Fatalf("DefaultEvictionStrategy = %s, want %s", got, tc.want)
			}
		})
	}
}
