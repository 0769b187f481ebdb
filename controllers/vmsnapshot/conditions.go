package vmsnapshot

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
)

// setCondition puts c into conds: its transition time moves only when its
// status changes, its probe time when anything about it does.
func setCondition(conds []snapshotv1.Condition, typ snapshotv1.ConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) []snapshotv1.Condition {
	for i := range conds {
		c := &conds[i]
		if c.Type != typ {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		if c.Status != status || c.Reason != reason {
			c.LastProbeTime = now
		}
		c.Status, c.Reason = status, reason
		return conds
	}
	return append(conds, snapshotv1.Condition{Type: typ, Status: status, Reason: reason, LastProbeTime: now, LastTransitionTime: now})
}

// condition is conds' condition of type typ (nil: none).
func condition(conds []snapshotv1.Condition, typ snapshotv1.ConditionType) *snapshotv1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
