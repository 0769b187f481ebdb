package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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
// StorageClass whose provisioner is Provisioner.
type ClaimReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Root is the node directory holding one directory per volume.
	Root string
	// Node is the node name the volumes are pinned to.
	Node string
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
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
	if pvc.Spec.StorageClassName == nil {
		return ctrl.Result{}, nil
	}
	class := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, class); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading storage class of %s: %w", klog.KObj(pvc), err)
	}
	pv, err := volumeFor(pvc, class, r.Root, r.Node)
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
	if err := r.Client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("creating volume %s for %s: %w", pv.Name, klog.KObj(pvc), err)
	}
	ctrl.LoggerFrom(ctx).Info("provisioned volume", "volume", pv.Name, "path", dir)
	r.Recorder.Eventf(pvc, nil, corev1.EventTypeNormal, "ProvisioningSucceeded", "Provision",
		"provisioned volume %s at %s on %s", pv.Name, filepath.Base(dir), r.Node)
	return ctrl.Result{}, nil
}

// SetupWithManager watches claims.
func (r *ClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("hostpath-claim").For(&corev1.PersistentVolumeClaim{}).Complete(r)
}
