package conditions

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Next is the state of a condition now reported as status, reason and
// msg, whose previous state is prev (nil when it is new).
func Next(prev *cdiv1.ConditionState, status corev1.ConditionStatus, reason, msg string, now metav1.Time) cdiv1.ConditionState {
	next := cdiv1.ConditionState{Status: status, Reason: reason, Message: msg, LastTransitionTime: now, LastHeartbeatTime: now}
	if prev == nil || prev.Status != status {
		return next
	}
	next.LastTransitionTime = prev.LastTransitionTime
	if prev.Reason == reason && prev.Message == msg {
		next.LastHeartbeatTime = prev.LastHeartbeatTime
	}
	return next
}

// ReadyMessage is the message of a DataVolume's Ready condition: why it
// failed, or what it waits for.
func ReadyMessage(dv *cdiv1.DataVolume) string {
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeReady {
			return c.Message
		}
	}
	return ""
}
