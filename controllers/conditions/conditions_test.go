package conditions

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestNext(t *testing.T) {
	t0, t1 := metav1.Unix(100, 0), metav1.Unix(200, 0)
	prev := &cdiv1.ConditionState{Status: corev1.ConditionFalse, Reason: "Pending", Message: "m", LastTransitionTime: t0, LastHeartbeatTime: t0}
	for _, tc := range []struct {
		name                string
		prev                *cdiv1.ConditionState
		status              corev1.ConditionStatus
		reason              string
		transition, beating metav1.Time
	}{
		{"new", nil, corev1.ConditionTrue, "Ready", t1, t1},
		{"unchanged", prev, corev1.ConditionFalse, "Pending", t0, t0},
		{"new reason", prev, corev1.ConditionFalse, "ImportInProgress", t0, t1},
		{"new status", prev, corev1.ConditionTrue, "Pending", t1, t1},
	} {
		got := Next(tc.prev, tc.status, tc.reason, "m", t1)
		if !got.LastTransitionTime.Equal(&tc.transition) || !got.LastHeartbeatTime.Equal(&tc.beating) || got.Status != tc.status || got.Reason != tc.reason {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}
