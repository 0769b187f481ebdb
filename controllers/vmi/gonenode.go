package vmi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
)

// NodeGoneReason is the event of a deleted VMI released by the controller
// because its node is gone.
const NodeGoneReason = "NodeGone"

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// releaseFromGoneNode lets the deletion of vmi finish when the node that
// ran it is gone: a node removed from the cluster takes its handler with
// it, and the handler's finalizer would keep the VMI (and a VM waiting to
// start it again) forever. Only once the VMI's launcher Pods are gone too,
// which the Pod garbage collector deletes with their node: until then a
// kubelet may still run the VM.
func (r *Reconciler) releaseFromGoneNode(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	if !controllerutil.ContainsFinalizer(vmi, launcherpod.HandlerFinalizer) || vmi.Status.NodeName == "" {
		return nil
	}
	switch err := r.Reader.Get(ctx, client.ObjectKey{Name: vmi.Status.NodeName}, &corev1.Node{}); {
	case err == nil:
		return nil // its handler finishes the deletion
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading node %s of %s: %w", vmi.Status.NodeName, klog.KObj(vmi), err)
	}
	if pods, err := r.launcherPods(ctx, vmi); err != nil || len(pods) > 0 {
		return err // the Pods' deletion brings the VMI back here
	}
	base := vmi.DeepCopy()
	controllerutil.RemoveFinalizer(vmi, launcherpod.HandlerFinalizer)
	if err := r.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("releasing %s from its gone node %s: %w", klog.KObj(vmi), vmi.Status.NodeName, err))
	}
	ctrl.LoggerFrom(ctx).Info("VMI released: its node and launcher Pods are gone", "vmi", klog.KObj(vmi), "node", vmi.Status.NodeName)
	r.event(vmi, corev1.EventTypeNormal, NodeGoneReason, "Node %s is gone with the VMI's launcher Pods: nothing of the VM runs; deletion finished", vmi.Status.NodeName)
	return nil
}

// launcherPods are the Pods vmi controls.
func (r *Reconciler) launcherPods(ctx context.Context, vmi *v1.VirtualMachineInstance) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, fmt.Errorf("listing the launcher Pods of %s: %w", klog.KObj(vmi), err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if metav1.IsControlledBy(&p, vmi) {
			out = append(out, p)
		}
	}
	return out, nil
}
