package hyperconverged

import (
	"context"
	"fmt"
	"maps"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// replaceImmutable deletes the object o will be applied over when o
// changes one of its fields the API server refuses to update: a
// StorageClass's provisioner, parameters, reclaim policy or binding mode
// (the hostpath classes' provisioner became the CSI driver). Volumes and
// claims of the class keep working: they name it, not its provisioner.
func (r *Reconciler) replaceImmutable(ctx context.Context, o *unstructured.Unstructured) error {
	if o.GetAPIVersion() != "storage.k8s.io/v1" || o.GetKind() != "StorageClass" {
		return nil
	}
	want := &storagev1.StorageClass{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, want); err != nil {
		return fmt.Errorf("reading StorageClass %s: %w", o.GetName(), err)
	}
	have := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: o.GetName()}, have); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !storageClassChanged(have, want) {
		return nil
	}
	if err := r.Client.Delete(ctx, have); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("replacing StorageClass %s (provisioner %s, now %s): %w", have.Name, have.Provisioner, want.Provisioner, err)
	}
	return nil
}

// storageClassChanged says whether want changes a field of have that a
// StorageClass cannot update; fields want leaves unset keep their
// defaults, which have holds.
func storageClassChanged(have, want *storagev1.StorageClass) bool {
	if have.Provisioner != want.Provisioner || !maps.Equal(have.Parameters, want.Parameters) {
		return true
	}
	if want.ReclaimPolicy != nil && (have.ReclaimPolicy == nil || *have.ReclaimPolicy != *want.ReclaimPolicy) {
		return true
	}
	return want.VolumeBindingMode != nil && (have.VolumeBindingMode == nil || *have.VolumeBindingMode != *want.VolumeBindingMode)
}
