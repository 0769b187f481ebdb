package vmi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
)

func TestSchedulingOf(t *testing.T) {
	now := metav1.Now()
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."}
	for name, tc := range map[string]struct {
		pod        *corev1.Pod
		phase      v1.VirtualMachineInstancePhase
		node       string
		condition  string // the PodScheduled message, when mirrored
		failReason string
	}{
		"no Pod yet":           {nil, v1.Pending, "", "", ""},
		"created, not decided": {&corev1.Pod{}, v1.Scheduling, "", "", ""},
		"unschedulable": {&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}}},
			v1.Scheduling, "", unschedulable.Message, ""},
		"bound": {&corev1.Pod{Spec: corev1.PodSpec{NodeName: "node2"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			v1.Scheduled, "node2", "", ""},
		"running": {&corev1.Pod{Spec: corev1.PodSpec{NodeName: "node2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			v1.Scheduled, "node2", "", ""},
		"ended": {&corev1.Pod{Spec: corev1.PodSpec{NodeName: "node2"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}},
			v1.Failed, "node2", "", LauncherPodEndedReason},
		"deleted before it was bound": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}},
			v1.Failed, "", "", LauncherPodEndedReason},
		"deleted while it runs": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "node2"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}, v1.Failed, "node2", "", LauncherPodEndedReason},
	} {
		got := SchedulingOf(tc.pod)
		msg := ""
		if got.PodScheduled != nil {
			msg = got.PodScheduled.Message
			if got.PodScheduled.Type != PodScheduledCondition || got.PodScheduled.Status != corev1.ConditionFalse || got.PodScheduled.Reason != "Unschedulable" {
				t.Errorf("%s: condition %+v", name, got.PodScheduled)
			}
		}
		if got.Phase != tc.phase || got.NodeName != tc.node || msg != tc.condition || got.Reason != tc.failReason {
			t.Errorf("%s: %+v; want %s on %q, condition %q, reason %q", name, got, tc.phase, tc.node, tc.condition, tc.failReason)
		}
	}
}

func TestFailureMessage(t *testing.T) {
	now := metav1.Now()
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"gone": {nil, "the launcher Pod is gone"},
		"killed": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm1-x"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: launcherpod.ComputeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}}}}},
			"launcher Pod virt-launcher-vm1-x ended (Failed): container compute exited 137 (Error)"},
		"evicted": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}},
			"launcher Pod p ended (Failed): Evicted, The node was low on resource: memory."},
		"deleted": {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &now}}, "launcher Pod p was deleted"},
	} {
		if got := FailureMessage(tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}
