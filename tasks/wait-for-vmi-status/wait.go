package waitforvmi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

// Params are the task's params.
type Params struct {
	VMIName, VMINamespace              string
	SuccessCondition, FailureCondition string
}

// ErrFailed is returned when the failure condition holds.
var ErrFailed = errors.New("failure condition met")

// Run waits until the VMI meets the success condition (nil) or the
// failure condition (ErrFailed), reporting phase changes to out. A VMI that
// does not exist yet is waited for.
func Run(ctx context.Context, c client.WithWatch, p Params, out io.Writer) error {
	if p.VMIName == "" {
		return errors.New("param vmiName is empty")
	}
	success, err := ParseCondition("successCondition", p.SuccessCondition)
	if err != nil {
		return err
	}
	failure, err := ParseCondition("failureCondition", p.FailureCondition)
	if err != nil {
		return err
	}
	if success == nil && failure == nil {
		return errors.New("params successCondition and failureCondition are both empty: nothing to wait for")
	}
	w := &waiter{success: success, failure: failure, out: out, name: p.VMINamespace + "/" + p.VMIName}
	for {
		done, err := w.round(ctx, c, p)
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("VirtualMachineInstance %s: %w (last phase %q)", w.name, ctx.Err(), w.phase)
		case <-time.After(time.Second):
		}
	}
}

type waiter struct {
	success, failure *Condition
	out              io.Writer
	name             string
	phase            v1.VirtualMachineInstancePhase
	seen             bool
}

// round checks the VMI, then watches it until the watch ends.
func (w *waiter) round(ctx context.Context, c client.WithWatch, p Params) (bool, error) {
	vmi := &v1.VirtualMachineInstance{}
	err := c.Get(ctx, client.ObjectKey{Namespace: p.VMINamespace, Name: p.VMIName}, vmi)
	switch {
	case apierrors.IsNotFound(err):
		if w.seen || w.phase == "" {
			fmt.Fprintf(w.out, "%s waiting for VirtualMachineInstance %s to exist\n", now(), w.name)
			w.seen, w.phase = false, "-"
		}
	case err != nil:
		return false, fmt.Errorf("reading VirtualMachineInstance %s: %w", w.name, err)
	default:
		if done, err := w.check(vmi); done {
			return true, err
		}
	}
	list := &v1.VirtualMachineInstanceList{}
	wi, err := c.Watch(ctx, list, client.InNamespace(p.VMINamespace), client.MatchingFields{"metadata.name": p.VMIName})
	if err != nil {
		return false, fmt.Errorf("watching VirtualMachineInstance %s: %w", w.name, err)
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if vmi, ok := ev.Object.(*v1.VirtualMachineInstance); ok {
				if done, err := w.check(vmi); done {
					return true, err
				}
			}
		case watch.Deleted:
			fmt.Fprintf(w.out, "%s VirtualMachineInstance %s was deleted; waiting for it to come back\n", now(), w.name)
			w.seen = false
		case watch.Error:
			return false, nil
		}
	}
	return false, nil
}

// check evaluates the conditions on one state of the VMI.
func (w *waiter) check(vmi *v1.VirtualMachineInstance) (bool, error) {
	if !w.seen || vmi.Status.Phase != w.phase {
		fmt.Fprintf(w.out, "%s VirtualMachineInstance %s phase %q\n", now(), w.name, vmi.Status.Phase)
		w.seen, w.phase = true, vmi.Status.Phase
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vmi)
	if err != nil {
		return true, err
	}
	if w.failure != nil && w.failure.Matches(obj) {
		return true, fmt.Errorf("VirtualMachineInstance %s: %w: %s (phase %q%s)", w.name, ErrFailed, w.failure, vmi.Status.Phase, readyMessage(vmi))
	}
	if w.success != nil && w.success.Matches(obj) {
		fmt.Fprintf(w.out, "%s VirtualMachineInstance %s: success condition met: %s\n", now(), w.name, w.success)
		return true, nil
	}
	return false, nil
}

func readyMessage(vmi *v1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady && c.Message != "" {
			return ", " + c.Reason + ": " + c.Message
		}
	}
	return ""
}

func now() string { return time.Now().UTC().Format(time.TimeOnly) }
