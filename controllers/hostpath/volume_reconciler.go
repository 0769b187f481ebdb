package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// VolumeReconciler deletes released volumes whose reclaim policy is Delete,
// data first.
type VolumeReconciler struct {
	Client client.Client
	Root   string
	// SharedRoot holds the shared volumes, which any node's provisioner
	// may delete; "" when this node has none.
	SharedRoot string
	// Node is this node: only its own volumes' directories are here.
	Node string
}

// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;delete
// The CSI driver's own reads (CheckShared, Placement).
// +kubebuilder:rbac:groups="",resources=nodes;persistentvolumeclaims,verbs=get;list

// Reconcile removes one released volume.
func (r *VolumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !releasedForDeletion(pv) || pv.Spec.HostPath == nil {
		return ctrl.Result{}, nil
	}
	root := r.Root
	switch VolumeNode(pv) {
	case r.Node:
	case "":
		if r.SharedRoot == "" {
			return ctrl.Result{}, nil
		}
		root = r.SharedRoot
	default:
		return ctrl.Result{}, nil
	}
	dir := pv.Spec.HostPath.Path
	if !within(root, dir) {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("volume %s path %s is outside %s; not deleting it", pv.Name, dir, root))
	}
	if err := os.RemoveAll(dir); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing data of %s: %w", klog.KObj(pv), err)
	}
	if err := r.Client.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting %s: %w", klog.KObj(pv), err)
	}
	ctrl.LoggerFrom(ctx).Info("deleted released volume", "volume", pv.Name, "path", dir)
	return ctrl.Result{}, nil
}

// within reports whether path is a directory strictly inside root.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel)
}

// SetupWithManager watches volumes.
func (r *VolumeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("hostpath-volume").For(&corev1.PersistentVolume{}).Complete(r)
}
