package workloadupdate

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRolledOut(t *testing.T) {
	ds := func(gen, observed int64, desired, updated, available, unavailable int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: appsv1.DaemonSetStatus{ObservedGeneration: observed,
			DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberAvailable: available, NumberUnavailable: unavailable}}
	}
	for _, tc := range []struct {
		name   string
		ds     *appsv1.DaemonSet
		want   bool
		reason string
	}{
		{"not installed", nil, false, "not installed"},
		{"new template not seen by the DaemonSet controller yet", ds(3, 2, 2, 2, 2, 0), false, "not rolled out"},
		{"one node still on the old template", ds(3, 3, 2, 1, 2, 0), false, "1 of 2 nodes updated"},
		{"updated, one Pod not available yet", ds(3, 3, 2, 2, 1, 1), false, "1 available"},
		{"every node updated and available", ds(3, 3, 2, 2, 2, 0), true, ""},
	} {
		got, reason := RolledOut(tc.ds)
		if got != tc.want || !strings.Contains(reason, tc.reason) || (tc.want && reason != "") {
			t.Errorf("%s: RolledOut = %v %q, want %v with %q", tc.name, got, reason, tc.want, tc.reason)
		}
	}
}
