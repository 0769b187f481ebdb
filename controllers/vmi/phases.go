package vmi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

// RecordPhases notes the phases a VMI went through in one placement, as
// KubeVirt's phaseTransitionTimestamps do: Pending since its creation, the
// others now. Phases already recorded keep their time.
func RecordPhases(vmi *v1.VirtualMachineInstance, now metav1.Time, phases ...v1.VirtualMachineInstancePhase) {
	for _, p := range phases {
		seen := false
		for _, ts := range vmi.Status.PhaseTransitionTimestamps {
			seen = seen || ts.Phase == p
		}
		if seen {
			continue
		}
		at := now
		if p == v1.Pending {
			at = vmi.CreationTimestamp
		}
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: at})
	}
}

// SetCondition sets the VMI condition t, keeping its transition time when
// its status stays.
func SetCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType, status corev1.ConditionStatus, reason, msg string) {
	c := v1.VirtualMachineInstanceCondition{
		Type: t, Status: status,
		Reason: reason, Message: msg, LastTransitionTime: metav1.Now(),
	}
	for i, old := range vmi.Status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			vmi.Status.Conditions[i] = c
			return
		}
	}
	vmi.Status.Conditions = append(vmi.Status.Conditions, c)
}

// RemoveCondition removes the VMI condition t.
func RemoveCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) {
	out := vmi.Status.Conditions[:0]
	for _, c := range vmi.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	vmi.Status.Conditions = out
}
