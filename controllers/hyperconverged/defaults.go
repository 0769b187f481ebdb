package hyperconverged

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubevirtv1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

// DefaultEvictionStrategy is HCO's default of spec.evictionStrategy for a
// cluster with nodes: LiveMigrate when VMs have more than one node to run
// on, so that a drain moves them; None on a single node, where a
// migration has nowhere to go.
func DefaultEvictionStrategy(nodes []corev1.Node) kubevirtv1.EvictionStrategy {
	n := 0
	for i := range nodes {
		if schedulable(&nodes[i]) {
			n++
		}
	}
	if n > 1 {
		return kubevirtv1.EvictionStrategyLiveMigrate
	}
	return kubevirtv1.EvictionStrategyNone
}

// schedulable says whether a Pod that tolerates nothing may be placed on
// node once it is up: the taints of the node's conditions
// (node.kubernetes.io/not-ready, ...) pass with them.
func schedulable(node *corev1.Node) bool {
	if node.Spec.Unschedulable {
		return false
	}
	for _, t := range node.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			continue
		}
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}

// defaultSpec fills what HCO defaults from the cluster when the
// HyperConverged leaves it unset (spec.evictionStrategy), so that the
// HyperConverged shows the value in force.
func (r *Reconciler) defaultSpec(ctx context.Context, hc *hcov1beta1.HyperConverged) error {
	if hc.Spec.EvictionStrategy != nil {
		return nil
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes for the default evictionStrategy of %s: %w", klog.KObj(hc), err)
	}
	base := hc.DeepCopy()
	strategy := DefaultEvictionStrategy(nodes.Items)
	hc.Spec.EvictionStrategy = &strategy
	if err := r.Client.Patch(ctx, hc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("defaulting the evictionStrategy of %s: %w", klog.KObj(hc), err)
	}
	return nil
}
