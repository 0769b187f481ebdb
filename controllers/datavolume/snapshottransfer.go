package datavolume

import (
	"context"
	"fmt"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

// A VolumeSnapshot restores only into a claim of its own namespace. A
// DataVolume of another namespace's snapshot is therefore, as in CDI, a
// restore into a transfer claim beside the snapshot, then a clone of that
// claim across namespaces (authorized as any clone is); the transfer claim
// is deleted once the DataVolume is done with it.

// TransferLabel marks a transfer claim with the UID of the DataVolume it
// is for: the only claims the controller may delete.
const TransferLabel = "tekvirt.io/transfer-for"

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=delete
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots,verbs=get;list;watch

// crossNamespaceSnapshot is dv's VolumeSnapshot source when it is of
// another namespace (nil otherwise).
func crossNamespaceSnapshot(dv *cdiv1.DataVolume) *cdiv1.DataVolumeSourceSnapshot {
	if src := dv.Spec.Source; src != nil && src.Snapshot != nil && src.Snapshot.Namespace != "" && src.Snapshot.Namespace != dv.Namespace {
		return src.Snapshot
	}
	return nil
}

// transferName is the transfer claim of dv.
func transferName(dv *cdiv1.DataVolume) string {
	return "tekvirt-transfer-" + string(dv.UID)
}

// transfer restores dv's VolumeSnapshot of another namespace into a
// transfer claim there and points dv (in memory) at that claim, which it
// then clones as a pvc source; done is set while dv must wait, or cannot.
func (r *Reconciler) transfer(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) (ctrl.Result, bool, error) {
	snap := crossNamespaceSnapshot(dv)
	if snap == nil {
		return ctrl.Result{}, false, nil
	}
	if err := r.authorizeClone(ctx, dv, obs); err != nil {
		if denied(err) {
			obs.invalid = err
			return ctrl.Result{}, true, nil
		}
		return ctrl.Result{}, true, err
	}
	key := client.ObjectKey{Namespace: snap.Namespace, Name: transferName(dv)}
	claim := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, key, claim)
	if apierrors.IsNotFound(err) {
		claim, obs.sourcePending, err = r.transferClaim(ctx, dv, snap)
		if err == nil && claim != nil {
			err = r.Client.Create(ctx, claim)
		}
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, true, fmt.Errorf("the transfer claim %s of %s: %w", key, klog.KObj(dv), err)
	}
	obs.clone = true
	if claim == nil || claim.Status.Phase != corev1.ClaimBound {
		if obs.sourcePending == "" {
			obs.sourcePending = fmt.Sprintf("restoring VolumeSnapshot %s/%s into PersistentVolumeClaim %s to clone it", snap.Namespace, snap.Name, key)
		}
		return ctrl.Result{RequeueAfter: progressEvery}, true, nil
	}
	dv.Spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: key.Namespace, Name: key.Name}}
	return ctrl.Result{}, false, nil
}

// transferClaim is the claim restoring snap for dv: the class and access
// modes dv's own claim has, at least the snapshot's size; nil with why
// while the snapshot is missing or not ready.
func (r *Reconciler) transferClaim(ctx context.Context, dv *cdiv1.DataVolume, snap *cdiv1.DataVolumeSourceSnapshot) (*corev1.PersistentVolumeClaim, string, error) {
	vs := &vsv1.VolumeSnapshot{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: snap.Namespace, Name: snap.Name}, vs); {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("waiting for VolumeSnapshot %s/%s: it does not exist", snap.Namespace, snap.Name), nil
	case err != nil:
		return nil, "", err
	case vs.Status == nil || !ptr.Deref(vs.Status.ReadyToUse, false):
		return nil, fmt.Sprintf("waiting for VolumeSnapshot %s/%s to be ready to use", snap.Namespace, snap.Name), nil
	}
	class, err := r.storageClass(ctx, dv)
	if err != nil {
		return nil, "", err
	}
	pvc, err := claimFor(dv, class)
	if err != nil {
		return nil, "", err
	}
	pvc.Namespace, pvc.Name = snap.Namespace, transferName(dv)
	// The snapshot's topology places it; the DataVolume's node is its own claim's.
	delete(pvc.Annotations, hostpath.AnnProvisionOnNode)
	delete(pvc.Annotations, hostpath.AnnSelectedNode)
	pvc.Labels = map[string]string{TransferLabel: string(dv.UID), CloneTargetNamespaceLabel: dv.Namespace, CloneTargetNameLabel: dv.Name}
	if size := vs.Status.RestoreSize; size != nil && size.Cmp(pvc.Spec.Resources.Requests[corev1.ResourceStorage]) > 0 {
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = *size
	}
	return pvc, "", nil
}

// deleteTransfers deletes the transfer claims made for DataVolume
// namespace/name, but those of the DataVolume keep (none if "").
func (r *Reconciler) deleteTransfers(ctx context.Context, namespace, name string, keep types.UID) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.Client.List(ctx, claims, client.MatchingLabels{CloneTargetNamespaceLabel: namespace, CloneTargetNameLabel: name}, client.HasLabels{TransferLabel}); err != nil {
		return fmt.Errorf("listing the transfer claims of %s/%s: %w", namespace, name, err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if keep != "" && c.Labels[TransferLabel] == string(keep) {
			continue
		}
		if err := r.Client.Delete(ctx, c, client.Preconditions{UID: ptr.To(c.UID)}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting transfer claim %s of %s/%s: %w", klog.KObj(c), namespace, name, err)
		}
		ctrl.LoggerFrom(ctx).Info("transfer claim deleted", "dataVolume", klog.KRef(namespace, name), "claim", klog.KObj(c))
	}
	return nil
}
