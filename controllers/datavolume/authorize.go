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
	return requester.MayCloneFrom(ctx, r.Client, u, CloneSources(dv, obs.dataSource)...)
}

// denied reports whether err is a refusal to clone that no retry fixes.
func denied(err error) bool {
	return errors.Is(err, requester.ErrDenied) || errors.Is(err, requester.ErrNotRecorded)
}
