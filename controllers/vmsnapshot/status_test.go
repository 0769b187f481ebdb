package vmsnapshot

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
)

func vmiWith(phase v1.VirtualMachineInstancePhase, conds ...v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: phase}}
	for _, c := range conds {
		vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return vmi
}

func TestIndications(t *testing.T) {
	agent, paused := v1.VirtualMachineInstanceAgentConnected, v1.VirtualMachineInstancePaused
	for _, tc := range []struct {
		name   string
		vmi    *v1.VirtualMachineInstance
		want   []snapshotv1.Indication
		freeze bool
	}{
		{"stopped", nil, nil, false},
		{"finished", vmiWith(v1.Succeeded, agent), nil, false},
		{"running with its agent", vmiWith(v1.Running, agent), []snapshotv1.Indication{snapshotv1.VMSnapshotGuestAgentIndication, snapshotv1.VMSnapshotOnlineSnapshotIndication}, true},
		{"running without an agent", vmiWith(v1.Running), []snapshotv1.Indication{snapshotv1.VMSnapshotNoGuestAgentIndication, snapshotv1.VMSnapshotOnlineSnapshotIndication}, false},
		{"paused", vmiWith(v1.Running, agent, paused), []snapshotv1.Indication{snapshotv1.VMSnapshotOnlineSnapshotIndication, snapshotv1.VMSnapshotPausedIndication}, false},
	} {
		if got := Indications(tc.vmi); !slices.Equal(got, tc.want) {
			t.Errorf("%s: indications %v, want %v", tc.name, got, tc.want)
		}
		if got := canFreeze(tc.vmi); got != tc.freeze {
			t.Errorf("%s: freeze %v, want %v", tc.name, got, tc.freeze)
		}
	}
}

func TestSnapshotStatus(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	now := metav1.NewTime(created.Add(time.Minute))
	late := metav1.NewTime(created.Add(snapshotv1.DefaultFailureDeadline + time.Second))
	snap := func(st *snapshotv1.VirtualMachineSnapshotStatus) *snapshotv1.VirtualMachineSnapshot {
		return &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: created}, Status: st}
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", UID: "vm-uid"}}
	contentWith := func(ready bool, cut *metav1.Time, errMsg string) *snapshotv1.VirtualMachineSnapshotContent {
		c := &snapshotv1.VirtualMachineSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Status: &snapshotv1.VirtualMachineSnapshotContentStatus{ReadyToUse: ptr.To(ready), CreationTime: cut}}
		if errMsg != "" {
			c.Status.Error = &snapshotv1.Error{Message: ptr.To(errMsg)}
		}
		return c
	}
	running := vmiWith(v1.Running, v1.VirtualMachineInstanceAgentConnected)
	for _, tc := range []struct {
		name        string
		s           *snapshotv1.VirtualMachineSnapshot
		obs         Observed
		now         metav1.Time
		phase       snapshotv1.VirtualMachineSnapshotPhase
		progressing string
		ready       corev1.ConditionStatus
		failure     string
		indications int
	}{
		{name: "no source yet", s: snap(nil), now: now, phase: snapshotv1.InProgress, progressing: reasonNoSource, ready: corev1.ConditionFalse},
		{name: "locked by another snapshot", s: snap(nil), obs: Observed{VM: vm, Waiting: `snapshot "other" in progress`}, now: now,
			phase: snapshotv1.InProgress, progressing: `Source not locked snapshot "other" in progress`, ready: corev1.ConditionFalse},
		{name: "locked, running", s: snap(nil), obs: Observed{VM: vm, VMI: running, Locked: true, Content: contentWith(false, nil, "")}, now: now,
			phase: snapshotv1.InProgress, progressing: reasonLocked, ready: corev1.ConditionFalse, indications: 2},
		{name: "cut, not ready yet", s: snap(nil), obs: Observed{VM: vm, Locked: true, Content: contentWith(false, &now, "")}, now: now,
			phase: snapshotv1.Succeeded, progressing: reasonComplete, ready: corev1.ConditionFalse},
		{name: "ready", s: snap(nil), obs: Observed{VM: vm, Locked: true, Content: contentWith(true, &now, "")}, now: now,
			phase: snapshotv1.Succeeded, progressing: reasonComplete, ready: corev1.ConditionTrue},
		{name: "freeze failed", s: snap(nil), obs: Observed{VM: vm, VMI: running, Locked: true, Content: contentWith(false, nil, "Failed freezing vm vm: no agent")}, now: now,
			phase: snapshotv1.InProgress, progressing: reasonInError, ready: corev1.ConditionFalse, indications: 2},
		{name: "past the deadline", s: snap(nil), obs: Observed{VM: vm, Locked: true}, now: late,
			phase: snapshotv1.Failed, progressing: reasonFailed, ready: corev1.ConditionFalse, failure: deadlineExceededError},
		{name: "succeeded before the deadline stays", s: snap(&snapshotv1.VirtualMachineSnapshotStatus{Phase: snapshotv1.Succeeded, CreationTime: &now}),
			obs: Observed{VM: vm, Content: contentWith(true, &now, "")}, now: late, phase: snapshotv1.Succeeded, progressing: reasonComplete, ready: corev1.ConditionTrue},
		{name: "invalid source", s: snap(nil), obs: Observed{Invalid: "spec.source: no"}, now: now,
			phase: snapshotv1.Failed, progressing: reasonFailed, ready: corev1.ConditionFalse, failure: "spec.source: no"},
		{name: "failed stays failed", s: snap(&snapshotv1.VirtualMachineSnapshotStatus{Phase: snapshotv1.Failed}), obs: Observed{VM: vm, Locked: true}, now: now,
			phase: snapshotv1.Failed, ready: corev1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := SnapshotStatus(tc.s, tc.obs, tc.now)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			if c := condition(st.Conditions, snapshotv1.ConditionProgressing); tc.progressing != "" && (c == nil || c.Reason != tc.progressing) {
				t.Errorf("progressing %+v, want %q", c, tc.progressing)
			}
			if c := condition(st.Conditions, snapshotv1.ConditionReady); c == nil || c.Status != tc.ready {
				t.Errorf("ready %+v, want %s", c, tc.ready)
			}
			c := condition(st.Conditions, snapshotv1.ConditionFailure)
			if tc.failure == "" && c != nil || tc.failure != "" && (c == nil || c.Reason != tc.failure) {
				t.Errorf("failure %+v, want %q", c, tc.failure)
			}
			if len(st.Indications) != tc.indications || len(st.SourceIndications) != tc.indications { //nolint:staticcheck // KubeVirt still writes it
				t.Errorf("indications %+v, want %d", st.SourceIndications, tc.indications)
			}
			if tc.obs.VM != nil && (st.SourceUID == nil || *st.SourceUID != "vm-uid") {
				t.Errorf("sourceUID %v", st.SourceUID)
			}
		})
	}
}

func TestSetConditionKeepsTransitionTime(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	conds := setCondition(nil, snapshotv1.ConditionReady, corev1.ConditionFalse, "a", t0)
	conds = setCondition(conds, snapshotv1.ConditionReady, corev1.ConditionFalse, "b", t1)
	if c := conds[0]; !c.LastTransitionTime.Equal(&t0) || !c.LastProbeTime.Equal(&t1) || c.Reason != "b" {
		t.Errorf("same status, new reason: %+v", c)
	}
	conds = setCondition(conds, snapshotv1.ConditionReady, corev1.ConditionTrue, "b", t1)
	if c := conds[0]; !c.LastTransitionTime.Equal(&t1) || len(conds) != 1 {
		t.Errorf("new status: %+v", conds)
	}
}
