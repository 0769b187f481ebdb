package handler

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	v1 "kubevirt.io/api/core/v1"
)

func TestPhaseEvent(t *testing.T) {
	for _, tc := range []struct {
		st   v1.VirtualMachineInstanceStatus
		want string // "" for none
	}{
		{v1.VirtualMachineInstanceStatus{Phase: v1.Running}, "Normal Started VirtualMachineInstance started."},
		{v1.VirtualMachineInstanceStatus{Phase: v1.Succeeded}, "Normal Stopped The VirtualMachineInstance was shut down."},
		{v1.VirtualMachineInstanceStatus{Phase: v1.Failed, Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady,
			Status: corev1.ConditionFalse, Reason: "ContainerDiskNotFound", Message: "image x not found"}}}, "Warning ContainerDiskNotFound image x not found"},
		{v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled}, ""},
	} {
		rec := events.NewFakeRecorder(4)
		(&Handler{Recorder: rec}).phaseEvent(&v1.VirtualMachineInstance{}, tc.st)
		var got string
		select {
		case got = <-rec.Events:
		default:
		}
		if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("phase %s: event %q, want %q", tc.st.Phase, got, tc.want)
		}
	}
}

func TestCredentialsEvent(t *testing.T) {
	synced := func(s corev1.ConditionStatus, msg string) v1.VirtualMachineInstanceStatus {
		return v1.VirtualMachineInstanceStatus{Conditions: []v1.VirtualMachineInstanceCondition{{
			Type: v1.VirtualMachineInstanceAccessCredentialsSynchronized, Status: s, Message: msg}}}
	}
	for _, tc := range []struct {
		name     string
		old, new v1.VirtualMachineInstanceStatus
		want     string // "" for none
	}{
		{"first success", v1.VirtualMachineInstanceStatus{}, synced(corev1.ConditionTrue, ""), "Normal AccessCredentialsSyncSuccess Access credentials sync successful."},
		{"unchanged", synced(corev1.ConditionTrue, ""), synced(corev1.ConditionTrue, ""), ""},
		{"failure", synced(corev1.ConditionTrue, ""), synced(corev1.ConditionFalse, "Secret k: bad"), "Warning AccessCredentialsSyncFailed Access credentials sync failed: Secret k: bad"},
		{"another failure", synced(corev1.ConditionFalse, "a"), synced(corev1.ConditionFalse, "b"), "Warning AccessCredentialsSyncFailed Access credentials sync failed: b"},
		{"no credentials", v1.VirtualMachineInstanceStatus{}, v1.VirtualMachineInstanceStatus{}, ""},
	} {
		rec := events.NewFakeRecorder(4)
		(&Handler{Recorder: rec}).credentialsEvent(&v1.VirtualMachineInstance{}, tc.old, tc.new)
		var got string
		select {
		case got = <-rec.Events:
		default:
		}
		if !strings.HasPrefix(got, tc.want) || (tc.want == "" && got != "") {
			t.Errorf("%s: event %q, want %q", tc.name, got, tc.want)
		}
	}
}
