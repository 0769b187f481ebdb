package vmi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
)

// Scheduling is what a VMI's launcher Pod says of the VMI's placement.
type Scheduling struct {
	// Phase is Pending (no Pod yet), Scheduling (not bound to a node),
	// Scheduled (bound) or Failed (the Pod ended before the VM ran).
	Phase v1.VirtualMachineInstancePhase
	// NodeName is the node the Pod is bound to.
	NodeName string
	// PodScheduled mirrors the Pod's condition while it is not bound (the
	// scheduler's message, e.g. "0/1 nodes are available: 1 Insufficient
	// memory."); nil otherwise.
	PodScheduled *v1.VirtualMachineInstanceCondition
	// Reason says why the VMI failed.
	Reason string
}

// PodScheduledCondition is the VMI condition that mirrors the Pod's.
const PodScheduledCondition = v1.VirtualMachineInstanceConditionType(corev1.PodScheduled)

// FailedCreateReason is the VMI's Synchronized condition's reason, and its
// event's, when the API server refuses its launcher Pod.
const FailedCreateReason = "FailedCreate"

// LauncherPodEndedReason fails a VMI whose launcher Pod ended before the
// VMI did (deleted, evicted, its container killed).
const LauncherPodEndedReason = "LauncherPodEnded"

// SchedulingOf reads the VMI's placement from its launcher Pod (nil: none).
func SchedulingOf(pod *corev1.Pod) Scheduling {
	switch {
	case pod == nil:
		return Scheduling{Phase: v1.Pending}
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded || pod.DeletionTimestamp != nil:
		// A Pod deleted under its VMI ends the VM: not a stop the VMI asked for.
		return Scheduling{Phase: v1.Failed, NodeName: pod.Spec.NodeName, Reason: LauncherPodEndedReason}
	case pod.Spec.NodeName != "":
		return Scheduling{Phase: v1.Scheduled, NodeName: pod.Spec.NodeName}
	}
	s := Scheduling{Phase: v1.Scheduling}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			s.PodScheduled = &v1.VirtualMachineInstanceCondition{Type: PodScheduledCondition, Status: corev1.ConditionFalse,
				Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		}
	}
	return s
}

// FailureMessage is the VMI's message for a launcher Pod that ended.
func FailureMessage(pod *corev1.Pod) string {
	if pod == nil {
		return "the launcher Pod is gone"
	}
	msg := fmt.Sprintf("launcher Pod %s ended (%s)", pod.Name, pod.Status.Phase)
	if pod.DeletionTimestamp != nil {
		msg = fmt.Sprintf("launcher Pod %s was deleted", pod.Name)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && cs.Name == launcherpod.ComputeContainer {
			msg += fmt.Sprintf(": container %s exited %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	if pod.Status.Reason != "" {
		msg += ": " + pod.Status.Reason
		if pod.Status.Message != "" {
			msg += ", " + pod.Status.Message
		}
	}
	return msg
}
