package migration

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"
)

// KubeVirt's defaults for how long a target Pod may stay unscheduled, and
// how long it may take to run at all, before the migration fails.
const (
	UnschedulableTimeout = 5 * time.Minute
	PendingTimeout       = 15 * time.Minute
)

// Observed is what the reconciler read for one migration.
type Observed struct {
	// VMI is the migration's VMI (nil: there is none).
	VMI *v1.VirtualMachineInstance
	// Target is the migration's target Pod (nil: none yet, or gone).
	Target *corev1.Pod
	// TargetCreated is set once a target Pod was made for the migration.
	TargetCreated bool
	// Busy says why a new migration must wait (the VMI migrates already,
	// or the cluster's or the node's limit is reached); empty: it may go.
	Busy string
	// Options are the migration's configuration (the cluster's, with the
	// MigrationPolicy's in their place), which the hand-off gives the
	// handlers.
	Options *v1.VMIMConfigurationOptions
	// Policy names the MigrationPolicy that applies (empty: none).
	Policy string
}

// Step is what the reconciler does next, and the phase that results.
type Step struct {
	Phase v1.VirtualMachineInstanceMigrationPhase
	// Reason is why the migration failed, waits, or is aborted.
	Reason string
	// CreateTarget makes the target Pod; DeleteTarget removes it.
	CreateTarget, DeleteTarget bool
	// HandOff gives the VMI's migration to the two nodes' handlers.
	HandOff bool
	// Abort asks the source handler to abort the running migration.
	Abort bool
	// Finish takes a succeeded migration off the VMI (the source Pod,
	// the target label).
	Finish bool
}

// ours is vmi's migration state when it is migration m's.
func ours(m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) *v1.VirtualMachineInstanceMigrationState {
	if vmi == nil || vmi.Status.MigrationState == nil || vmi.Status.MigrationState.MigrationUID != m.UID {
		return nil
	}
	return vmi.Status.MigrationState
}

// Next decides the migration's next step from what was observed at now.
func Next(m *v1.VirtualMachineInstanceMigration, o Observed, now time.Time) Step {
	phase := m.Status.Phase
	if phase == v1.MigrationSucceeded || phase == v1.MigrationFailed {
		return Step{Phase: phase}
	}
	ms := ours(m, o.VMI)
	if step, ok := ending(m, o, ms); ok {
		return step
	}
	switch {
	case (phase == v1.MigrationPhaseUnset || phase == v1.MigrationPending) && o.Target == nil:
		// A target Pod found while the phase still reads Pending is one
		// made by a step whose phase the cache has not caught up with.
		return pending(o)
	case ms == nil:
		return scheduling(o, now)
	}
	return handedOff(o.Target, ms, phase, now)
}

// ending: the migration's end, as its state or its VMI say (ok false:
// it goes on).
func ending(m *v1.VirtualMachineInstanceMigration, o Observed, ms *v1.VirtualMachineInstanceMigrationState) (Step, bool) {
	switch {
	case ms != nil && ms.Completed && ms.TargetNodeDomainDetected && o.VMI.Status.NodeName == ms.TargetNode:
		// The target's handler took the VMI over (it selects the VMI by
		// the label Finish removes until then).
		return Step{Phase: v1.MigrationSucceeded, Finish: true}, true
	case ms != nil && ms.Completed:
		return Step{Phase: v1.MigrationRunning}, true
	case ms != nil && ms.Failed:
		return Step{Phase: v1.MigrationFailed, Reason: ms.FailureReason, DeleteTarget: true}, true
	case m.DeletionTimestamp != nil:
		return deleted(ms), true
	case o.VMI == nil:
		return Step{Phase: v1.MigrationFailed, Reason: fmt.Sprintf("VMI %s/%s does not exist", m.Namespace, m.Spec.VMIName), DeleteTarget: true}, true
	case ms == nil && o.VMI.Status.Phase != v1.Running:
		return Step{Phase: v1.MigrationFailed, Reason: fmt.Sprintf("Cannot migrate VMI %s/%s: it is %s, not Running", m.Namespace, m.Spec.VMIName, phaseName(o.VMI)), DeleteTarget: true}, true
	}
	return Step{}, false
}

// handedOff follows a migration the handlers have: the target prepares,
// then the source migrates; a target Pod that ends fails it, or aborts
// it once started; one that does not run fails it after KubeVirt's
// timeout.
func handedOff(target *corev1.Pod, ms *v1.VirtualMachineInstanceMigrationState, phase v1.VirtualMachineInstanceMigrationPhase, now time.Time) Step {
	if target == nil || target.DeletionTimestamp != nil || target.Status.Phase == corev1.PodFailed || target.Status.Phase == corev1.PodSucceeded {
		// The source's migration fails with it; until the source handler
		// says so, a migration that started is aborted.
		if ms.StartTimestamp == nil {
			return Step{Phase: v1.MigrationFailed, Reason: "the migration's target Pod " + ms.TargetPod + " ended before the migration started", DeleteTarget: true}
		}
		return Step{Phase: phase, Abort: true, Reason: "the migration's target Pod " + ms.TargetPod + " ended while the migration ran"}
	}
	switch {
	case ms.StartTimestamp != nil:
		return Step{Phase: v1.MigrationRunning}
	case ms.TargetNodeAddress != "":
		return Step{Phase: v1.MigrationTargetReady}
	case target.Status.Phase == corev1.PodRunning:
		return Step{Phase: v1.MigrationPreparingTarget}
	case now.Sub(target.CreationTimestamp.Time) > PendingTimeout:
		return Step{Phase: v1.MigrationFailed, DeleteTarget: true, Reason: fmt.Sprintf("the migration's target Pod %s did not run within %s", target.Name, PendingTimeout)}
	}
	return Step{Phase: v1.MigrationScheduled}
}

// pending: a VMI that cannot move fails the migration (KubeVirt's admission
// message); one that can waits for its turn, then gets its target Pod.
func pending(o Observed) Step {
	for _, c := range o.VMI.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceIsMigratable && c.Status == corev1.ConditionFalse {
			return Step{Phase: v1.MigrationFailed, Reason: fmt.Sprintf("Cannot migrate VMI, Reason: %s, Message: %s", c.Reason, c.Message)}
		}
	}
	if !o.VMI.IsMigratable() {
		return Step{Phase: v1.MigrationPending, Reason: "the VMI's LiveMigratable condition is not known yet"}
	}
	if o.Busy != "" {
		return Step{Phase: v1.MigrationPending, Reason: o.Busy}
	}
	return Step{Phase: v1.MigrationScheduling, CreateTarget: true}
}

// scheduling waits for kube-scheduler to place the target Pod, then hands
// the VMI over: the target node's handler prepares the Pod's files while
// the kubelet starts its container, not after the kubelet reports it
// running (up to a second later). A Pod that stays unschedulable fails
// the migration after KubeVirt's timeout.
func scheduling(o Observed, now time.Time) Step {
	p := o.Target
	switch {
	case p == nil && o.TargetCreated:
		return Step{Phase: v1.MigrationFailed, Reason: "the migration's target Pod was deleted"}
	case p == nil:
		return Step{Phase: v1.MigrationScheduling, CreateTarget: true}
	case p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return Step{Phase: v1.MigrationFailed, Reason: fmt.Sprintf("the migration's target Pod %s ended (%s)", p.Name, p.Status.Phase), DeleteTarget: true}
	case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning:
		return Step{Phase: v1.MigrationPreparingTarget, HandOff: true}
	case p.Spec.NodeName != "":
		return Step{Phase: v1.MigrationScheduled, HandOff: true}
	}
	age := now.Sub(p.CreationTimestamp.Time)
	if msg, ok := unschedulable(p); ok {
		if age > UnschedulableTimeout {
			return Step{Phase: v1.MigrationFailed, DeleteTarget: true,
				Reason: fmt.Sprintf("the migration's target Pod %s was unschedulable for %s: %s", p.Name, UnschedulableTimeout, msg)}
		}
		return Step{Phase: v1.MigrationScheduling, Reason: msg}
	}
	if age > PendingTimeout {
		return Step{Phase: v1.MigrationFailed, DeleteTarget: true, Reason: fmt.Sprintf("the migration's target Pod %s was not scheduled within %s", p.Name, PendingTimeout)}
	}
	return Step{Phase: v1.MigrationScheduling}
}

// unschedulable is kube-scheduler's message for a Pod it cannot place.
func unschedulable(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

// deleted: a migration deleted before it ended is cancelled, as
// virtctl migrate-cancel does: one the source runs is aborted, and the
// finalizer waits for its end.
func deleted(ms *v1.VirtualMachineInstanceMigrationState) Step {
	if ms == nil || ms.StartTimestamp == nil {
		return Step{Phase: v1.MigrationFailed, Reason: "the migration was cancelled", DeleteTarget: true}
	}
	return Step{Phase: v1.MigrationRunning, Abort: true, Reason: "the migration was cancelled"}
}

func phaseName(vmi *v1.VirtualMachineInstance) string {
	if vmi.Status.Phase == "" {
		return "not started"
	}
	return string(vmi.Status.Phase)
}
