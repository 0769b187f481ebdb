package cleanupvm

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/guestrun"
)

// Params are the task's params.
type Params struct {
	VMName, VMNamespace string
	Stop, Delete        bool
	Timeout             time.Duration
	// Guest, when its command or script is set, runs in the VM first
	// (VMName, VMNamespace and Timeout are the task's).
	Guest guestrun.Params
	// Executor runs Guest through the guest agent.
	Executor guestrun.Executor
}

// HasGuestCommand is whether the params ask for a command in the guest.
func (p Params) HasGuestCommand() bool { return p.Guest.Script != "" || len(p.Guest.Command) > 0 }

// Run runs the guest command when one is given (its failure fails the
// task before anything is stopped or deleted, as kubevirt-tekton-tasks),
// then stops and/or deletes the VM. A VM that does not exist is already
// clean: the step succeeds, so that finally tasks can run after a failed
// creation.
func Run(ctx context.Context, c client.Client, p Params, out, errOut io.Writer) error {
	if p.VMName == "" {
		return fmt.Errorf("param vmName is empty")
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	key := client.ObjectKey{Namespace: p.VMNamespace, Name: p.VMName}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, key, vm); apierrors.IsNotFound(err) {
		fmt.Fprintf(out, "VirtualMachine %s does not exist: nothing to clean up\n", key)
		return nil
	} else if err != nil {
		return fmt.Errorf("reading VirtualMachine %s: %w", key, err)
	}
	if p.HasGuestCommand() {
		g := p.Guest
		g.VMName, g.VMNamespace, g.Timeout = p.VMName, p.VMNamespace, p.Timeout
		if err := guestrun.Run(ctx, c, p.Executor, g, out, errOut); err != nil {
			return fmt.Errorf("the command in VirtualMachine %s failed, so it was neither stopped nor deleted: %w", key, err)
		}
	}
	if p.Stop {
		halted := v1.RunStrategyHalted
		base := vm.DeepCopy()
		vm.Spec.RunStrategy, vm.Spec.Running = &halted, nil
		if err := c.Patch(ctx, vm, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("stopping VirtualMachine %s: %w", key, err)
		}
		if err := waitGone(ctx, c, key, &v1.VirtualMachineInstance{}); err != nil {
			return fmt.Errorf("VirtualMachine %s did not stop within %s: %w", key, p.Timeout, err)
		}
		fmt.Fprintf(out, "VirtualMachine %s stopped\n", key)
	}
	if p.Delete {
		if err := c.Delete(ctx, vm); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting VirtualMachine %s: %w", key, err)
		}
		if err := waitGone(ctx, c, key, &v1.VirtualMachine{}); err != nil {
			return fmt.Errorf("VirtualMachine %s was not deleted within %s: %w", key, p.Timeout, err)
		}
		if err := waitGone(ctx, c, key, &v1.VirtualMachineInstance{}); err != nil {
			return fmt.Errorf("the VMI of VirtualMachine %s was not deleted within %s: %w", key, p.Timeout, err)
		}
		fmt.Fprintf(out, "VirtualMachine %s deleted\n", key)
	}
	return nil
}

// waitGone polls until the object does not exist.
func waitGone(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) error {
	for {
		err := c.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
