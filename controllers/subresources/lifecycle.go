package subresources

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "kubevirt.io/api/core/v1"
)

// change is what a start, stop or restart does to a VM, as planned from
// the VM and its VMI as they are.
type change struct {
	// runStrategy, when set, becomes the VM's (spec.running instead when
	// the VM uses that deprecated field).
	runStrategy *v1.VirtualMachineRunStrategy
	// requests, when set, become status.stateChangeRequests.
	requests []v1.VirtualMachineStateChangeRequest
	// grace, when set, becomes the running VMI's termination grace period
	// before it is stopped.
	grace *int64
}

// KubeVirt's answers, which clients match.
const (
	vmNotRunning   = "VM is not running"
	alreadyRunning = "VM is already running"
	underway       = "unable to complete request: stop/start already underway"
)

var vmResource = v1.Resource("virtualmachine")

func conflict(name, msg string) error {
	return apierrors.NewConflict(vmResource, name, errors.New(msg))
}

// running reports whether vmi is a VMI that has started and not ended.
func running(vmi *v1.VirtualMachineInstance) bool {
	return vmi != nil && !vmi.IsFinal() && vmi.Status.Phase != v1.Unknown && vmi.Status.Phase != v1.VmPhaseUnset
}

// stopped reports whether no VMI runs: none, or one that ended.
func stopped(vmi *v1.VirtualMachineInstance) bool { return vmi == nil || vmi.IsFinal() }

// withRequests is the VM's requests followed by add, refused while other
// requests wait (a lone stop replaces them, as it settles any).
func withRequests(vm *v1.VirtualMachine, add ...v1.VirtualMachineStateChangeRequest) ([]v1.VirtualMachineStateChangeRequest, error) {
	switch {
	case len(vm.Status.StateChangeRequests) == 0:
		return add, nil
	case len(add) == 1 && add[0].Action == v1.StopRequest:
		return add, nil
	}
	return nil, conflict(vm.Name, underway)
}

// planStart: Halted -> runStrategy Always; Manual and RerunOnFailure -> a
// start request (after a stop of the VMI that ended, which must go first);
// Always and Once start by themselves.
func planStart(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, opts *v1.StartOptions) (change, error) {
	if running(vmi) {
		return change{}, conflict(vm.Name, alreadyRunning)
	}
	if opts.Paused {
		return change{}, apierrors.NewBadRequest("starting a VM paused is not supported: tekvirt does not implement spec.startStrategy Paused")
	}
	rs, err := vm.RunStrategy()
	if err != nil {
		return change{}, apierrors.NewBadRequest(err.Error())
	}
	switch rs {
	case v1.RunStrategyHalted:
		always := v1.RunStrategyAlways
		return change{runStrategy: &always}, nil
	case v1.RunStrategyManual, v1.RunStrategyRerunOnFailure:
		if rs == v1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == v1.Failed {
			return change{}, conflict(vm.Name, fmt.Sprintf("%v does not support starting VM from failed state", rs))
		}
		start := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
		add := []v1.VirtualMachineStateChangeRequest{start}
		if vmi != nil && vmi.IsFinal() {
			add = []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: &vmi.UID}, start}
		}
		reqs, err := withRequests(vm, add...)
		return change{requests: reqs}, err
	}
	return change{}, conflict(vm.Name, fmt.Sprintf("%v does not support manual start requests", rs))
}

// planStop: Always and Once -> runStrategy Halted; Manual and
// RerunOnFailure -> a stop request for the running VMI; Halted only takes
// a shorter grace period for a VMI still stopping. A grace period is set
// on the VMI first, so that its stop takes that long at most.
func planStop(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, opts *v1.StopOptions) (change, error) {
	rs, err := vm.RunStrategy()
	if err != nil {
		return change{}, apierrors.NewBadRequest(err.Error())
	}
	if opts.GracePeriod != nil && *opts.GracePeriod < 0 {
		return change{}, apierrors.NewBadRequest("gracePeriod has to be greater or equal to 0")
	}
	var c change
	if !stopped(vmi) && opts.GracePeriod != nil {
		c.grace = opts.GracePeriod
	}
	switch rs {
	case v1.RunStrategyAlways, v1.RunStrategyOnce:
		halted := v1.RunStrategyHalted
		c.runStrategy = &halted
		return c, nil
	case v1.RunStrategyHalted:
		if stopped(vmi) {
			return change{}, conflict(vm.Name, vmNotRunning)
		}
		old := vmi.Spec.TerminationGracePeriodSeconds
		if opts.GracePeriod == nil || (old != nil && *opts.GracePeriod >= *old) {
			return change{}, conflict(vm.Name, fmt.Sprintf("%v only supports manual stop requests with a shorter graceperiod", rs))
		}
	case v1.RunStrategyManual, v1.RunStrategyRerunOnFailure:
		if stopped(vmi) {
			return change{}, conflict(vm.Name, vmNotRunning)
		}
	}
	c.requests, err = withRequests(vm, v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &vmi.UID})
	return c, err
}

// planRestart: a stop of the VMI then a start, for every strategy that
// runs again (not Halted or Once). A grace period of 0 (forced) stops the
// VMI at once; another is refused, as by KubeVirt.
func planRestart(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, opts *v1.RestartOptions) (change, error) {
	if g := opts.GracePeriodSeconds; g != nil && *g != 0 {
		if *g < 0 {
			return change{}, apierrors.NewBadRequest("gracePeriod has to be greater or equal to 0")
		}
		return change{}, apierrors.NewBadRequest("For force restart, only gracePeriod=0 is supported for now")
	}
	rs, err := vm.RunStrategy()
	if err != nil {
		return change{}, apierrors.NewBadRequest(err.Error())
	}
	if rs == v1.RunStrategyHalted || rs == v1.RunStrategyOnce {
		return change{}, conflict(vm.Name, fmt.Sprintf("RunStategy %v does not support manual restart requests", rs))
	}
	if vmi == nil {
		return change{}, conflict(vm.Name, fmt.Sprintf("VM is not running: %v", v1.RunStrategyHalted))
	}
	var c change
	if opts.GracePeriodSeconds != nil && !stopped(vmi) {
		c.grace = opts.GracePeriodSeconds
	}
	c.requests, err = withRequests(vm, v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &vmi.UID}, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest})
	return c, err
}
