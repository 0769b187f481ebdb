package vmi

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

func TestRecordPhases(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	t1, t2 := metav1.NewTime(created.Add(time.Second)), metav1.NewTime(created.Add(time.Minute))
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
	RecordPhases(vmi, t1, v1.Pending, v1.Scheduling) // unschedulable at first
	RecordPhases(vmi, t2, v1.Pending, v1.Scheduling, v1.Scheduled)
	want := []struct {
		p  v1.VirtualMachineInstancePhase
		at metav1.Time
	}{{v1.Pending, created}, {v1.Scheduling, t1}, {v1.Scheduled, t2}}
	got := vmi.Status.PhaseTransitionTimestamps
	if len(got) != len(want) {
		t.Fatalf("timestamps = %+v", got)
	}
	for i, w := range want {
		if got[i].Phase != w.p || !got[i].PhaseTransitionTimestamp.Equal(&w.at) {
			t.Errorf("[%d] = %s at %s, want %s at %s", i, got[i].Phase, got[i].PhaseTransitionTimestamp, w.p, w.at)
		}
	}
}
