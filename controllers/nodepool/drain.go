package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// evictable says whether drain evicts p: not a DaemonSet's or a static
// Pod, not finished (as kubectl drain chooses).
func evictable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

// drain cordons the hosted node and evicts its Pods (PodDisruptionBudgets
// apply); done once none is left. A node that is gone or not Ready (its
// kubelet cannot stop anything) counts as drained.
func drain(ctx context.Context, hosted kubernetes.Interface, name string) (done bool, msg string, err error) {
	node, err := hosted.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading hosted node %s: %w", name, err)
	}
	if !nodeReady(node) {
		return true, "", nil
	}
	if !node.Spec.Unschedulable {
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := hosted.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return false, "", fmt.Errorf("cordoning hosted node %s: %w", name, err)
		}
	}
	pods, err := hosted.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
	if err != nil {
		return false, "", fmt.Errorf("listing the Pods of hosted node %s: %w", name, err)
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !evictable(p) {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
		err := hosted.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case apierrors.IsTooManyRequests(err):
			msg = fmt.Sprintf("Pod %s/%s may not be evicted yet (disruption budget)", p.Namespace, p.Name)
		case err != nil && !apierrors.IsNotFound(err):
			return false, "", fmt.Errorf("evicting Pod %s/%s from hosted node %s: %w", p.Namespace, p.Name, name, err)
		}
	}
	if left == 0 {
		return true, "", nil
	}
	if msg == "" {
		msg = fmt.Sprintf("%d Pods leaving", left)
	}
	return false, msg, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
