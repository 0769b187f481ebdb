package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ClaimReconciler provisions a volume for each pending claim of a
// StorageClass whose provisioner is Provisioner. One runs on every node: a
// claim that names its node (the scheduler's selected node, or
// AnnProvisionOnNode) is served by that node's alone; for any other, the
// first to create the volume wins and the others drop their directory.
type ClaimReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Root is the node directory holding one directory per volume.
	Root string
	// SharedRoot holds the shared classes' volumes, "" when this node
	// has none (see IsShared).
	SharedRoot string
	// Node is the node name the volumes are pinned to.
	Node string
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile creates the directory and PersistentVolume of one claim.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wantsVolume(pvc) {
		return ctrl.Result{}, nil
	}
	if leave, res, err := r.leaves(ctx, pvc); leave || err != nil {
		return res, err
	}
	if pvc.Spec.StorageClassName == nil {
		return ctrl.Result{}, nil
	}
	class := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, class); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading storage class of %s: %w", klog.KObj(pvc), err)
	}
	root, node := r.Root, r.Node
	if IsShared(class) {
		if err := r.checkShared(ctx, class.Name); err != nil {
			r.Recorder.Eventf(pvc, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", err.Error())
			return ctrl.Result{RequeueAfter: sharedRetry}, nil
		}
		root, node = r.SharedRoot, ""
	}
	pv, err := volumeFor(pvc, class, root, node)
	if err != nil {
		r.Recorder.Eventf(pvc, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", err.Error())
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	dir := pv.Spec.HostPath.Path
	// World-writable like an emptyDir, so pods running as any user can use it.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return ctrl.Result{}, fmt.Errorf("creating %s for %s: %w", dir, klog.KObj(pvc), err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Client.Create(ctx, pv); apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, r.dropIfLost(ctx, pv.Name, dir)
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("creating volume %s for %s: %w", pv.Name, klog.KObj(pvc), err)
	}
	ctrl.LoggerFrom(ctx).Info("provisioned volume", "volume", pv.Name, "path", dir)
	where := "on " + r.Node
	if node == "" {
		where = "shared by every node"
	}
	r.Recorder.Eventf(pvc, nil, corev1.EventTypeNormal, "ProvisioningSucceeded", "Provision",
		"provisioned volume %s at %s %s", pv.Name, filepath.Base(dir), where)
	return ctrl.Result{}, nil
}

// sharedRetry is how soon a shared claim is tried again after the shared
// root did not show every node.
const sharedRetry = 10 * time.Second

// checkShared says why this node cannot make a shared volume of class: no
// shared root, or one that does not show every node's marker.
func (r *ClaimReconciler) checkShared(ctx context.Context, class string) error {
	if r.SharedRoot == "" {
		return fmt.Errorf("storage class %s asks for shared volumes, but the provisioner of node %s has no shared root (--shared-root)", class, r.Node)
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	missing, err := unsharedNodes(r.SharedRoot, names)
	if err != nil {
		return fmt.Errorf("reading the nodes' markers in %s: %w", r.SharedRoot, err)
	}
	if len(missing) > 0 {
		return notSharedError(class, r.SharedRoot, r.Node, missing)
	}
	return nil
}

// leaves reports whether this node leaves pvc to another's provisioner,
// and when to look at it again.
func (r *ClaimReconciler) leaves(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, ctrl.Result, error) {
	n := claimNode(pvc)
	if n != "" {
		return n != r.Node, ctrl.Result{}, nil
	}
	// A claim no node was asked for is left to the other nodes' while
	// this one is cordoned: no new Pod could use a volume here.
	cordoned, err := r.cordoned(ctx)
	if err != nil || cordoned {
		return true, ctrl.Result{RequeueAfter: cordonedRetry}, err
	}
	return false, ctrl.Result{}, nil
}

// cordonedRetry is how soon a claim left while this node is cordoned is
// looked at again (node changes are not watched).
const cordonedRetry = 5 * time.Second

// cordoned says whether this provisioner's node is unschedulable; a node
// that cannot be read is not.
func (r *ClaimReconciler) cordoned(ctx context.Context) (bool, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Node}, node); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return node.Spec.Unschedulable, nil
}

// dropIfLost removes the directory made for volume name when another
// node's provisioner created that volume first. The directory is empty: no
// Pod can mount a volume before it exists.
func (r *ClaimReconciler) dropIfLost(ctx context.Context, name, dir string) error {
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if n := VolumeNode(pv); n == r.Node || n == "" {
		// Ours, or a shared volume: its directory is the same one.
		return nil
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s, made for volume %s which node %s provisioned: %w", dir, name, VolumeNode(pv), err)
	}
	return nil
}

// SetupWithManager watches claims.
func (r *ClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("hostpath-claim").For(&corev1.PersistentVolumeClaim{}).Complete(r)
}
