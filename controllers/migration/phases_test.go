package migration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	mig := func(phase v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
		return &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "mig-1"},
			Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}, Status: v1.VirtualMachineInstanceMigrationStatus{Phase: phase}}
	}
	migratable := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}
	vmi := func(ms *v1.VirtualMachineInstanceMigrationState, conds ...v1.VirtualMachineInstanceCondition) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
			Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node1", Conditions: conds, MigrationState: ms}}
	}
	state := func(f func(*v1.VirtualMachineInstanceMigrationState)) *v1.VirtualMachineInstanceMigrationState {
		ms := &v1.VirtualMachineInstanceMigrationState{MigrationUID: "mig-1", SourceNode: "node1", TargetNode: "node2", TargetPod: "target"}
		if f != nil {
			f(ms)
		}
		return ms
	}
	moved := func(v *v1.VirtualMachineInstance) *v1.VirtualMachineInstance {
		v.Status.NodeName = "node2"
		return v
	}
	started := metav1.NewTime(now.Add(-time.Minute))
	pod := func(node string, phase corev1.PodPhase, age time.Duration, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "target", CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase, Conditions: conds}}
	}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."}
	deleting := mig(v1.MigrationRunning)
	deleting.DeletionTimestamp = &started

	for _, tc := range []struct {
		name   string
		m      *v1.VirtualMachineInstanceMigration
		o      Observed
		want   Step
		reason string // a part of want's reason
	}{
		{name: "new, migratable: the target Pod is made", m: mig(""), o: Observed{VMI: vmi(nil, migratable)},
			want: Step{Phase: v1.MigrationScheduling, CreateTarget: true}},
		{name: "new, not migratable: failed with KubeVirt's words", m: mig(""),
			o:      Observed{VMI: vmi(nil, v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse, Reason: v1.VirtualMachineInstanceReasonDisksNotMigratable, Message: "cannot migrate VMI: PVC d is not shared"})},
			want:   Step{Phase: v1.MigrationFailed},
			reason: "Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI: PVC d is not shared"},
		{name: "new, condition not known yet: waits", m: mig(""), o: Observed{VMI: vmi(nil)}, want: Step{Phase: v1.MigrationPending}, reason: "not known yet"},
		{name: "new, limit reached: waits", m: mig(v1.MigrationPending), o: Observed{VMI: vmi(nil, migratable), Busy: "5 migrations run in the cluster"},
			want: Step{Phase: v1.MigrationPending}, reason: "5 migrations"},
		{name: "no VMI", m: mig(""), o: Observed{}, want: Step{Phase: v1.MigrationFailed, DeleteTarget: true}, reason: "does not exist"},
		{name: "a VMI that is not running", m: mig(""), o: Observed{VMI: &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled}}},
			want: Step{Phase: v1.MigrationFailed, DeleteTarget: true}, reason: "it is Scheduled, not Running"},
		{name: "target Pod made, the phase not caught up: none made again", m: mig(""), o: Observed{VMI: vmi(nil, migratable), Target: pod("", corev1.PodPending, time.Second)},
			want: Step{Phase: v1.MigrationScheduling}},
		{name: "target Pod made, not bound yet", m: mig(v1.MigrationScheduling), o: Observed{VMI: vmi(nil, migratable), Target: pod("", corev1.PodPending, time.Second), TargetCreated: true},
			want: Step{Phase: v1.MigrationScheduling}},
		{name: "target unschedulable: waits with the scheduler's message", m: mig(v1.MigrationScheduling),
			o:    Observed{VMI: vmi(nil, migratable), Target: pod("", corev1.PodPending, time.Minute, unschedulable), TargetCreated: true},
			want: Step{Phase: v1.MigrationScheduling}, reason: "didn't match Pod's node affinity"},
		{name: "target unschedulable too long: failed, Pod deleted", m: mig(v1.MigrationScheduling),
			o:    Observed{VMI: vmi(nil, migratable), Target: pod("", corev1.PodPending, 6*time.Minute, unschedulable), TargetCreated: true},
			want: Step{Phase: v1.MigrationFailed, DeleteTarget: true}, reason: "unschedulable for 5m0s"},
		{name: "target bound, not running yet: handed to the handlers", m: mig(v1.MigrationScheduling), o: Observed{VMI: vmi(nil, migratable), Target: pod("node2", corev1.PodPending, time.Second), TargetCreated: true},
			want: Step{Phase: v1.MigrationScheduled, HandOff: true}},
		{name: "handed off, target not running yet", m: mig(v1.MigrationScheduled), o: Observed{VMI: vmi(state(nil), migratable), Target: pod("node2", corev1.PodPending, time.Second), TargetCreated: true},
			want: Step{Phase: v1.MigrationScheduled}},
		{name: "handed off, target running", m: mig(v1.MigrationScheduled), o: Observed{VMI: vmi(state(nil), migratable), Target: pod("node2", corev1.PodRunning, time.Second), TargetCreated: true},
			want: Step{Phase: v1.MigrationPreparingTarget}},
		{name: "handed off, target prepared before the kubelet said it runs", m: mig(v1.MigrationScheduled),
			o:    Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.TargetNodeAddress = "10.0.0.2:8187" }), migratable), Target: pod("node2", corev1.PodPending, time.Second)},
			want: Step{Phase: v1.MigrationTargetReady}},
		{name: "handed off, target never runs: failed, Pod deleted", m: mig(v1.MigrationScheduled), o: Observed{VMI: vmi(state(nil), migratable), Target: pod("node2", corev1.PodPending, 16*time.Minute), TargetCreated: true},
			want: Step{Phase: v1.MigrationFailed, DeleteTarget: true}, reason: "did not run within 15m0s"},
		{name: "target running: handed to the handlers", m: mig(v1.MigrationScheduled), o: Observed{VMI: vmi(nil, migratable), Target: pod("node2", corev1.PodRunning, time.Second), TargetCreated: true},
			want: Step{Phase: v1.MigrationPreparingTarget, HandOff: true}},
		{name: "target Pod deleted before the hand-off", m: mig(v1.MigrationScheduled), o: Observed{VMI: vmi(nil, migratable), TargetCreated: true},
			want: Step{Phase: v1.MigrationFailed}, reason: "target Pod was deleted"},
		{name: "target prepared", m: mig(v1.MigrationPreparingTarget),
			o:    Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.TargetNodeAddress = "10.0.0.2:8187" }), migratable), Target: pod("node2", corev1.PodRunning, time.Minute)},
			want: Step{Phase: v1.MigrationTargetReady}},
		{name: "the source started", m: mig(v1.MigrationTargetReady),
			o: Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) {
				ms.TargetNodeAddress, ms.StartTimestamp = "10.0.0.2:8187", &started
			}), migratable), Target: pod("node2", corev1.PodRunning, time.Minute)},
			want: Step{Phase: v1.MigrationRunning}},
		{name: "completed, the target's handler not there yet: runs on", m: mig(v1.MigrationRunning),
			o:    Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.StartTimestamp, ms.Completed = &started, true }), migratable)},
			want: Step{Phase: v1.MigrationRunning}},
		{name: "completed and taken over by the target", m: mig(v1.MigrationRunning),
			o: Observed{VMI: moved(vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) {
				ms.StartTimestamp, ms.Completed, ms.TargetNodeDomainDetected = &started, true, true
			}), migratable))},
			want: Step{Phase: v1.MigrationSucceeded, Finish: true}},
		{name: "failed on the source", m: mig(v1.MigrationRunning),
			o: Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) {
				ms.StartTimestamp, ms.Failed, ms.FailureReason = &started, true, "Live migration stuck for 150 seconds and has been aborted"
			}), migratable)},
			want: Step{Phase: v1.MigrationFailed, DeleteTarget: true}, reason: "stuck for 150 seconds"},
		{name: "target Pod gone while it runs: aborted", m: mig(v1.MigrationRunning),
			o:    Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.StartTimestamp = &started }), migratable)},
			want: Step{Phase: v1.MigrationRunning, Abort: true}},
		{name: "target Pod gone before it started: failed", m: mig(v1.MigrationPreparingTarget),
			o:    Observed{VMI: vmi(state(nil), migratable)},
			want: Step{Phase: v1.MigrationFailed, DeleteTarget: true}, reason: "ended before the migration started"},
		{name: "deleted while it runs: aborted", m: deleting,
			o:    Observed{VMI: vmi(state(func(ms *v1.VirtualMachineInstanceMigrationState) { ms.StartTimestamp = &started }), migratable), Target: pod("node2", corev1.PodRunning, time.Minute)},
			want: Step{Phase: v1.MigrationRunning, Abort: true}},
		{name: "another migration's state is not ours", m: mig(""),
			o:    Observed{VMI: vmi(&v1.VirtualMachineInstanceMigrationState{MigrationUID: "other", Completed: true}, migratable), Busy: ""},
			want: Step{Phase: v1.MigrationScheduling, CreateTarget: true}},
		{name: "ended stays ended", m: mig(v1.MigrationSucceeded), o: Observed{}, want: Step{Phase: v1.MigrationSucceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(tc.m, tc.o, now)
			reason := got.Reason
			got.Reason, tc.want.Reason = "", ""
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Fatalf("Next = %+v (reason %q), want %+v with %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}
