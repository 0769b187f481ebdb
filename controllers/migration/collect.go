package migration

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "kubevirt.io/api/core/v1"
)

// FinalizedKept is how many ended migrations of one VMI stay, the newest,
// as KubeVirt's migration controller keeps them.
const FinalizedKept = 5

// Collectable are the ended migrations of one VMI beyond the newest
// FinalizedKept, oldest first; migrations holds that VMI's migrations.
func Collectable(migrations []v1.VirtualMachineInstanceMigration) []v1.VirtualMachineInstanceMigration {
	var ended []v1.VirtualMachineInstanceMigration
	for _, m := range migrations {
		if m.IsFinal() && m.DeletionTimestamp == nil {
			ended = append(ended, m)
		}
	}
	if len(ended) <= FinalizedKept {
		return nil
	}
	slices.SortFunc(ended, func(a, b v1.VirtualMachineInstanceMigration) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return ended[:len(ended)-FinalizedKept]
}

// collect deletes the ended migrations of m's VMI beyond the newest
// FinalizedKept. Migrations are found by the label the reconciler puts on
// each (the VMI's name), as virtctl migrate-cancel finds them.
func (r *Reconciler) collect(ctx context.Context, m *v1.VirtualMachineInstanceMigration) error {
	list := &v1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(m.Namespace), client.MatchingLabels{v1.MigrationSelectorLabel: m.Spec.VMIName}); err != nil {
		return fmt.Errorf("listing the migrations of VMI %s/%s: %w", m.Namespace, m.Spec.VMIName, err)
	}
	mine := slices.DeleteFunc(list.Items, func(o v1.VirtualMachineInstanceMigration) bool { return o.Spec.VMIName != m.Spec.VMIName })
	for _, old := range Collectable(mine) {
		if err := r.Client.Delete(ctx, &old, client.Preconditions{UID: &old.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the ended migration %s: %w", klog.KObj(&old), err)
		}
		log.FromContext(ctx).Info("ended migration collected", "migration", klog.KObj(&old), "kept", FinalizedKept)
	}
	return nil
}

// settled handles a migration with nothing left to drive (done true): one
// whose VMI is gone is deleted; one that ended loses its finalizer and
// makes room among its VMI's ended migrations.
func (r *Reconciler) settled(ctx context.Context, m *v1.VirtualMachineInstanceMigration) (done bool, err error) {
	if m.DeletionTimestamp == nil {
		switch gone, err := r.vmiGone(ctx, m); {
		case err != nil:
			return true, err
		case gone:
			return true, r.deleteOrphan(ctx, m)
		}
	}
	if !m.IsFinal() {
		return false, nil
	}
	if err := r.dropFinalizer(ctx, m); err != nil {
		return true, err
	}
	return true, r.collect(ctx, m)
}

// vmiGone says m's VMI does not exist, read past the cache before it says
// so: a migration created just after its VMI must not be taken for an
// orphan.
func (r *Reconciler) vmiGone(ctx context.Context, m *v1.VirtualMachineInstanceMigration) (bool, error) {
	key := client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}
	readers := []client.Reader{r.Client}
	if r.Reader != nil {
		readers = append(readers, r.Reader)
	}
	for _, rd := range readers {
		switch err := rd.Get(ctx, key, &v1.VirtualMachineInstance{}); {
		case err == nil:
			return false, nil
		case !apierrors.IsNotFound(err):
			return false, fmt.Errorf("reading the VMI of migration %s: %w", klog.KObj(m), err)
		}
	}
	return true, nil
}

// deleteOrphan deletes m, whose VMI is gone, as KubeVirt does: a migration
// outlives nothing it could move (one not ended yet is cancelled on the
// way, by its finalizer).
func (r *Reconciler) deleteOrphan(ctx context.Context, m *v1.VirtualMachineInstanceMigration) error {
	if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting migration %s of the deleted VMI %s: %w", klog.KObj(m), m.Spec.VMIName, err)
	}
	log.FromContext(ctx).Info("migration of a deleted VMI deleted", "migration", klog.KObj(m), "vmi", m.Spec.VMIName)
	return nil
}
