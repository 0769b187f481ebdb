package vm

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

// action is what a reconcile does to the VMI.
type action int

const (
	actNone action = iota
	actCreate
	actDelete
	// actHalt ends a Once run: the VM's run strategy becomes Halted, as
	// KubeVirt does once the single run is over.
	actHalt
)

func finished(vmi *v1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == v1.Succeeded || vmi.Status.Phase == v1.Failed
}

// decide returns what the run strategy and the first state change request
// of vm ask of the VMI as it is now, as KubeVirt's VM controller does.
func decide(vm *v1.VirtualMachine, rs v1.VirtualMachineRunStrategy, vmi *v1.VirtualMachineInstance) (action, error) {
	if vmi != nil && vmi.DeletionTimestamp != nil {
		return actNone, nil // wait until it is gone
	}
	strategy, ok := strategies[rs]
	if !ok {
		return actNone, fmt.Errorf("spec.runStrategy %q is not one of Always, RerunOnFailure, Once, Manual, Halted", rs)
	}
	act := strategy(vm, vmi)
	if act == actCreate && vm.Status.RestoreInProgress != nil {
		// A restore writes the VM's spec and disks: nothing starts meanwhile.
		return actNone, nil
	}
	return act, nil
}

// strategies decide, per run strategy, for a VMI not being deleted.
var strategies = map[v1.VirtualMachineRunStrategy]func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) action{
	v1.RunStrategyHalted: func(_ *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) action {
		if vmi != nil {
			return actDelete
		}
		return actNone
	},
	v1.RunStrategyAlways: func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) action {
		switch {
		case vmi == nil:
			return actCreate
		case finished(vmi) || stopRequested(vm.Status.StateChangeRequests, vmi):
			return actDelete // recreated on the next pass
		}
		return actNone
	},
	v1.RunStrategyRerunOnFailure: func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) action {
		reqs := vm.Status.StateChangeRequests
		switch {
		case vmi != nil && (finished(vmi) || stopRequested(reqs, vmi)):
			return actDelete // started again only after a failure
		case vmi != nil:
			return actNone
		case startRequested(reqs) || vm.Status.RunStrategy != v1.RunStrategyRerunOnFailure:
			// A VM new to this strategy starts; after that, only by request.
			return actCreate
		}
		return actNone
	},
	v1.RunStrategyOnce: func(_ *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) action {
		switch {
		case vmi == nil:
			return actCreate
		case finished(vmi):
			return actHalt
		}
		return actNone
	},
	v1.RunStrategyManual: func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) action {
		reqs := vm.Status.StateChangeRequests
		switch {
		case vmi == nil && startRequested(reqs):
			return actCreate
		case stopRequested(reqs, vmi):
			return actDelete
		}
		return actNone
	},
}

// Restart backoff after failed VMIs, as KubeVirt's CrashLoopBackOff:
// 5s, 10s, 20s, ... up to 5 minutes.
const (
	backoffBase = 5 * time.Second
	backoffMax  = 5 * time.Minute
)

// startBackoff is the wait before the next start after n consecutive failures.
func startBackoff(n int) time.Duration {
	d := backoffBase
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// recordStartFailure counts a Failed VMI once and sets when to retry.
func recordStartFailure(st *v1.VirtualMachineStatus, vmi *v1.VirtualMachineInstance, now metav1.Time) {
	if st.StartFailure != nil && st.StartFailure.LastFailedVMIUID == vmi.UID {
		return
	}
	n := 1
	if st.StartFailure != nil {
		n = st.StartFailure.ConsecutiveFailCount + 1
	}
	retry := metav1.NewTime(now.Add(startBackoff(n)))
	st.StartFailure = &v1.VirtualMachineStartFailure{ConsecutiveFailCount: n, LastFailedVMIUID: vmi.UID, RetryAfterTimestamp: &retry}
}

// retryWait is how long a start must still wait after failures.
func retryWait(st *v1.VirtualMachineStatus, now metav1.Time) time.Duration {
	if st.StartFailure == nil || st.StartFailure.RetryAfterTimestamp == nil {
		return 0
	}
	return max(0, st.StartFailure.RetryAfterTimestamp.Sub(now.Time))
}

// printableStatus is the one-word state `kubectl get vm` shows.
func printableStatus(vm *v1.VirtualMachine, rs v1.VirtualMachineRunStrategy, vmi *v1.VirtualMachineInstance, now metav1.Time) v1.VirtualMachinePrintableStatus {
	switch {
	case vm.DeletionTimestamp != nil:
		return v1.VirtualMachineStatusTerminating
	case vmi == nil && retryWait(&vm.Status, now) > 0 && rs != v1.RunStrategyHalted:
		return v1.VirtualMachineStatusCrashLoopBackOff
	case vmi == nil:
		if rs == v1.RunStrategyAlways || rs == v1.RunStrategyRerunOnFailure {
			return v1.VirtualMachineStatusStarting
		}
		return v1.VirtualMachineStatusStopped
	case vmi.DeletionTimestamp != nil:
		return v1.VirtualMachineStatusStopping
	}
	switch vmi.Status.Phase {
	case v1.VmPhaseUnset, v1.Pending, v1.Scheduling, v1.Scheduled:
		return v1.VirtualMachineStatusStarting
	case v1.Running:
		if c := vmiCondition(vmi, v1.VirtualMachineInstancePaused); c != nil && c.Status == corev1.ConditionTrue {
			return v1.VirtualMachineStatusPaused
		}
		return v1.VirtualMachineStatusRunning
	case v1.Succeeded, v1.Failed:
		return v1.VirtualMachineStatusStopped
	}
	return v1.VirtualMachineStatusUnknown
}

func vmiCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstanceCondition {
	for i := range vmi.Status.Conditions {
		if vmi.Status.Conditions[i].Type == t {
			return &vmi.Status.Conditions[i]
		}
	}
	return nil
}

// setStatus writes the VM status for the VMI as observed and the error, if
// any, that stopped the reconcile (reported as the Failure condition).
func setStatus(vm *v1.VirtualMachine, rs v1.VirtualMachineRunStrategy, vmi *v1.VirtualMachineInstance, failure error, now metav1.Time) {
	st := &vm.Status
	st.ObservedGeneration = vm.Generation
	st.RunStrategy = rs
	st.Created = vmi != nil
	st.PrintableStatus = printableStatus(vm, rs, vmi, now)
	ready := v1.VirtualMachineCondition{Type: v1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: "VMINotExists", Message: "VMI does not exist"}
	if vmi != nil {
		ready.Reason, ready.Message = "VMINotReady", fmt.Sprintf("VMI is %s", orUnset(vmi.Status.Phase))
		if c := vmiCondition(vmi, v1.VirtualMachineInstanceReady); c != nil {
			ready.Status, ready.Reason, ready.Message = c.Status, c.Reason, c.Message
		}
	}
	mirrorConditions(st, vmi, now)
	st.Ready = ready.Status == corev1.ConditionTrue
	if st.Ready {
		st.StartFailure = nil // it runs: the crash loop is over
	}
	setCondition(st, ready, now)
	if failure != nil {
		setCondition(st, v1.VirtualMachineCondition{Type: v1.VirtualMachineFailure, Status: corev1.ConditionTrue, Reason: "ReconcileError", Message: failure.Error()}, now)
	} else {
		removeCondition(st, v1.VirtualMachineFailure)
	}
}

// ownConditions are the VM's own condition types; every other is its
// VMI's, mirrored.
var ownConditions = map[v1.VirtualMachineConditionType]bool{v1.VirtualMachineReady: true, v1.VirtualMachineFailure: true}

// mirrorConditions copies the VMI's conditions (Paused, Synchronized with
// FailedCreate, AgentConnected, ...) but Ready into the VM, as KubeVirt's
// VM controller does, and drops those the VMI no longer has (all of them
// when there is no VMI).
func mirrorConditions(st *v1.VirtualMachineStatus, vmi *v1.VirtualMachineInstance, now metav1.Time) {
	has := map[v1.VirtualMachineConditionType]bool{}
	if vmi != nil {
		for _, c := range vmi.Status.Conditions {
			t := v1.VirtualMachineConditionType(c.Type)
			if ownConditions[t] {
				continue
			}
			has[t] = true
			setCondition(st, v1.VirtualMachineCondition{Type: t, Status: c.Status, Reason: c.Reason, Message: c.Message}, now)
		}
	}
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if ownConditions[c.Type] || has[c.Type] {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

func orUnset(p v1.VirtualMachineInstancePhase) v1.VirtualMachineInstancePhase {
	if p == "" {
		return v1.Pending
	}
	return p
}

// setCondition replaces the condition of c's type, keeping its transition
// time when the status did not change.
func setCondition(st *v1.VirtualMachineStatus, c v1.VirtualMachineCondition, now metav1.Time) {
	for i, old := range st.Conditions {
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		st.Conditions[i] = c
		return
	}
	c.LastTransitionTime = now
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *v1.VirtualMachineStatus, t v1.VirtualMachineConditionType) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
