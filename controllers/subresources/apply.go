package subresources

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

// apply makes change c to vm and its VMI: each write is conditional on the
// object being as read (a concurrent change is a lostRace, never lost), and
// only a dry run with dryRun ["All"].
func (a *API) apply(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, c change, dryRun []string) error {
	var opts []client.PatchOption
	var statusOpts []client.SubResourcePatchOption
	switch {
	case len(dryRun) == 0:
	case slices.Equal(dryRun, []string{metav1.DryRunAll}):
		opts, statusOpts = append(opts, client.DryRunAll), append(statusOpts, client.DryRunAll)
	default:
		return apierrors.NewBadRequest(`dryRun may only be ["All"]`)
	}
	locked := client.MergeFromWithOptimisticLock{}
	if c.grace != nil && vmi != nil {
		base := vmi.DeepCopy()
		vmi.Spec.TerminationGracePeriodSeconds = c.grace
		// A VMI gone meanwhile (a restart's old one) has nothing left to
		// stop sooner: the VM's change still applies.
		if err := a.Client.Patch(ctx, vmi, client.MergeFromWithOptions(base, locked), opts...); err != nil && !apierrors.IsNotFound(err) {
			return raced(err)
		}
	}
	if c.runStrategy != nil {
		base := vm.DeepCopy()
		if vm.Spec.RunStrategy == nil && vm.Spec.Running != nil {
			running := *c.runStrategy != v1.RunStrategyHalted
			vm.Spec.Running = &running
		} else {
			vm.Spec.RunStrategy = c.runStrategy
		}
		if err := a.Client.Patch(ctx, vm, client.MergeFromWithOptions(base, locked), opts...); err != nil {
			return raced(err)
		}
	}
	if c.requests != nil {
		base := vm.DeepCopy()
		vm.Status.StateChangeRequests = c.requests
		if err := a.Client.Status().Patch(ctx, vm, client.MergeFromWithOptions(base, locked), statusOpts...); err != nil {
			return raced(err)
		}
	}
	return nil
}

// lostRace is a write refused because its object changed since it was read.
type lostRace struct{ err error }

func (l lostRace) Error() string { return l.err.Error() }

// raced marks a write that lost a race, for change to plan again, and
// passes any other error on.
func raced(err error) error {
	if apierrors.IsConflict(err) {
		return lostRace{err}
	}
	return err
}
