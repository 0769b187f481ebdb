package datavolume

import (
	"context"
	"errors"
	"fmt"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
)

// authorizeClone checks, as a clone run or sender is about to start, that
// the DataVolume's requester may clone from where its source is now: the
// PVC's namespace and, for a sourceRef, the DataSource's. Admission checked
// the same, but a DataSource can be re-pointed after it; the controller
// itself has no clone rights to lend.
func (r *Reconciler) authorizeClone(ctx context.Context, dv *cdiv1.DataVolume, obs *observed) error {
	u, err := requester.Of(dv)
	if err != nil {
		return fmt.Errorf("DataVolume %s/%s cannot clone: %w", dv.Namespace, dv.Name, err)
	}
	type source struct{ kind, ns, name string }
	var sources []source
	if ds := obs.dataSource; ds != nil {
		sources = append(sources, source{"DataSource", ds.Namespace, ds.Name})
	}
	pvc := dv.Spec.Source.PVC
	ns := pvc.Namespace
	if ns == "" {
		ns = dv.Namespace
	}
	sources = append(sources, source{"PVC", ns, pvc.Name})
	for _, s := range sources {
		if err := requester.MayClone(ctx, r.Client, u, s.ns); err != nil {
			return fmt.Errorf("%s may not clone %s %s/%s: %w", u.Username, s.kind, s.ns, s.name, err)
		}
	}
	return nil
}

// denied reports whether err is a refusal to clone that no retry fixes.
func denied(err error) bool {
	return errors.Is(err, requester.ErrDenied) || errors.Is(err, requester.ErrNotRecorded)
}
