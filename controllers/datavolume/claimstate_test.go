package datavolume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestClaimPodState(t *testing.T) {
	tests := []struct {
		phase     cdiv1.DataVolumePhase
		wantPhase corev1.PodPhase
		wantReady bool
	}{
		{cdiv1.Pending, "", false},
		{cdiv1.WaitForFirstConsumer, "", false},
		{cdiv1.ImportScheduled, corev1.PodPending, false},
		{cdiv1.UploadScheduled, corev1.PodPending, false},
		{cdiv1.ImportInProgress, corev1.PodRunning, true},
		{cdiv1.CloneInProgress, corev1.PodRunning, true},
		{cdiv1.UploadReady, corev1.PodRunning, true},
		{cdiv1.Succeeded, corev1.PodSucceeded, false},
		{cdiv1.Failed, corev1.PodFailed, false},
	}
	for _, tt := range tests {
		phase, ready := claimPodState(cdiv1.DataVolumeStatus{Phase: tt.phase})
		if phase != tt.wantPhase || ready != tt.wantReady {
			t.Errorf("%s: pod phase %q ready %v, want %q %v", tt.phase, phase, ready, tt.wantPhase, tt.wantReady)
		}
	}
}
