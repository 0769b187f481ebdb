package vmsnapshot

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
)

// KubeVirt's words for where a snapshot stands.
const (
	reasonLocked          = "Source locked and operation in progress"
	reasonNotLocked       = "Source not locked"
	reasonNoSource        = "Source does not exist"
	reasonComplete        = "Operation complete"
	reasonFailed          = "Operation failed"
	reasonDeleting        = "VM snapshot is deleting"
	reasonInError         = "In error state"
	reasonReady           = "Ready"
	reasonNotReady        = "Not ready"
	deadlineExceededError = "snapshot deadline exceeded"
	failedFreezeMsg       = "Failed freezing vm"
)

// indicationMessages are KubeVirt's messages of each indication.
var indicationMessages = map[snapshotv1.Indication]string{
	snapshotv1.VMSnapshotOnlineSnapshotIndication: "Snapshot taken while the VM was running. Consistency depends on guest-agent quiescing.",
	snapshotv1.VMSnapshotGuestAgentIndication:     "Guest agent was active and attempted to quiesce the filesystem for application consistency.",
	snapshotv1.VMSnapshotNoGuestAgentIndication:   "Guest agent was not available. Snapshot is crash-consistent and may not be application-consistent.",
	snapshotv1.VMSnapshotPausedIndication:         "Snapshot taken while the VM was paused. Snapshot is crash-consistent and may not be application-consistent.",
}

// Observed is what one reconcile of a VM snapshot saw.
type Observed struct {
	// VM is the source (nil: it does not exist); VMI its instance (nil:
	// the VM is not running).
	VM  *v1.VirtualMachine
	VMI *v1.VirtualMachineInstance
	// Content is the snapshot's content, with its status as just computed
	// (nil: not made yet).
	Content *snapshotv1.VirtualMachineSnapshotContent
	// Locked: the VM's status.snapshotInProgress names this snapshot.
	Locked bool
	// Waiting says why the VM could not be locked yet.
	Waiting string
	// Invalid says why the snapshot can never be taken.
	Invalid string
	// Volumes are the VM's volumes with claims, included or not.
	Volumes *snapshotv1.SnapshotVolumesLists
}

// online reports whether vmi runs (a snapshot of it is taken live).
func online(vmi *v1.VirtualMachineInstance) bool {
	return vmi != nil && !vmi.IsFinal() && vmi.DeletionTimestamp == nil
}

func vmiCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// paused reports whether vmi's guest is paused (no freeze: it runs no
// agent call).
func paused(vmi *v1.VirtualMachineInstance) bool {
	return vmiCondition(vmi, v1.VirtualMachineInstancePaused)
}

// canFreeze reports whether a snapshot of vmi freezes its file systems:
// it runs, unpaused, with its guest agent connected.
func canFreeze(vmi *v1.VirtualMachineInstance) bool {
	return online(vmi) && !paused(vmi) && vmiCondition(vmi, v1.VirtualMachineInstanceAgentConnected)
}

// Indications are what a snapshot of vmi says about its consistency
// (none for a VM that does not run).
func Indications(vmi *v1.VirtualMachineInstance) []snapshotv1.Indication {
	if !online(vmi) {
		return nil
	}
	out := []snapshotv1.Indication{snapshotv1.VMSnapshotOnlineSnapshotIndication}
	switch {
	case paused(vmi):
		out = append(out, snapshotv1.VMSnapshotPausedIndication)
	case canFreeze(vmi):
		out = append(out, snapshotv1.VMSnapshotGuestAgentIndication)
	default:
		out = append(out, snapshotv1.VMSnapshotNoGuestAgentIndication)
	}
	slices.Sort(out)
	return out
}

// deadline is how long s may take (KubeVirt's default: 5 minutes; 0: no limit).
func deadline(s *snapshotv1.VirtualMachineSnapshot) time.Duration {
	if s.Spec.FailureDeadline != nil {
		return s.Spec.FailureDeadline.Duration
	}
	return snapshotv1.DefaultFailureDeadline
}

// deadlineExceeded reports whether s, not done, ran past its deadline.
func deadlineExceeded(s *snapshotv1.VirtualMachineSnapshot, now metav1.Time) bool {
	if s.Status != nil && (s.Status.Phase == snapshotv1.Succeeded || s.Status.CreationTime != nil) {
		return false
	}
	d := deadline(s)
	return d > 0 && now.Sub(s.CreationTimestamp.Time) > d
}

// Done reports whether st is final: the snapshot was taken or failed.
func Done(st *snapshotv1.VirtualMachineSnapshotStatus) bool {
	return st != nil && (st.Phase == snapshotv1.Succeeded || st.Phase == snapshotv1.Failed)
}

// SnapshotStatus is s's status given what a reconcile observed, as
// KubeVirt's controller reports it.
func SnapshotStatus(s *snapshotv1.VirtualMachineSnapshot, obs Observed, now metav1.Time) *snapshotv1.VirtualMachineSnapshotStatus {
	st := &snapshotv1.VirtualMachineSnapshotStatus{ReadyToUse: ptr.To(false)}
	if s.Status != nil {
		st = s.Status.DeepCopy()
	}
	if obs.VM != nil && st.SourceUID == nil {
		st.SourceUID = ptr.To(obs.VM.UID)
	}
	if c := obs.Content; c != nil && c.Status != nil {
		st.VirtualMachineSnapshotContentName = ptr.To(c.Name)
		st.CreationTime, st.ReadyToUse, st.Error = c.Status.CreationTime, c.Status.ReadyToUse, c.Status.Error
	}
	switch {
	case st.Phase == snapshotv1.Failed:
	case obs.Invalid != "":
		fail(st, obs.Invalid, now)
	case deadlineExceeded(s, now):
		fail(st, deadlineExceededError, now)
	case st.Phase == snapshotv1.Succeeded || st.CreationTime != nil:
		st.Phase = snapshotv1.Succeeded
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonComplete, now)
		if obs.Volumes != nil {
			st.SnapshotVolumes = obs.Volumes
		}
	default:
		inProgress(st, s, obs, now)
	}
	if ptr.Deref(st.ReadyToUse, false) {
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionTrue, reasonReady, now)
	} else {
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, reasonNotReady, now)
	}
	if st.Error != nil && st.Phase != snapshotv1.Failed {
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonInError, now)
	}
	return st
}

// fail ends st for reason.
func fail(st *snapshotv1.VirtualMachineSnapshotStatus, reason string, now metav1.Time) {
	st.Phase = snapshotv1.Failed
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionFailure, corev1.ConditionTrue, reason, now)
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonFailed, now)
}

// inProgress is st of s while it is being taken (or deleted before it is).
func inProgress(st *snapshotv1.VirtualMachineSnapshotStatus, s *snapshotv1.VirtualMachineSnapshot, obs Observed, now metav1.Time) {
	st.Phase = snapshotv1.InProgress
	switch {
	case obs.VM == nil:
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonNoSource, now)
	case obs.Locked:
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, reasonLocked, now)
	default:
		reason := reasonNotLocked
		if obs.Waiting != "" {
			reason += " " + obs.Waiting
		}
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reason, now)
	}
	if obs.VM != nil {
		setIndications(st, obs.VMI)
	}
	if s.DeletionTimestamp != nil {
		st.Phase = snapshotv1.Deleting
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonDeleting, now)
	}
}

// setIndications writes vmi's indications in both of KubeVirt's fields.
func setIndications(st *snapshotv1.VirtualMachineSnapshotStatus, vmi *v1.VirtualMachineInstance) {
	in := Indications(vmi)
	st.Indications = in //nolint:staticcheck // deprecated, and still what KubeVirt's clients read
	st.SourceIndications = nil
	for _, in := range in {
		st.SourceIndications = append(st.SourceIndications, snapshotv1.SourceIndication{Indication: in, Message: indicationMessages[in]})
	}
}
