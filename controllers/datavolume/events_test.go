package datavolume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestPhaseEvent(t *testing.T) {
	dv := func(src cdiv1.DataVolumeSource) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk"}, Spec: cdiv1.DataVolumeSpec{Source: &src}}
	}
	http := dv(cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://x"}})
	clone := dv(cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "golden", Name: "os"}})
	upload := dv(cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}})
	failed := cdiv1.DataVolumeStatus{Phase: cdiv1.Failed, ClaimName: "disk",
		Conditions: []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeReady, Message: "sha256 of the image is ab, want cd"}}}
	for name, tc := range map[string]struct {
		dv   *cdiv1.DataVolume
		from cdiv1.DataVolumePhase
		st   cdiv1.DataVolumeStatus
		want *event
	}{
		"no change":        {http, cdiv1.ImportInProgress, cdiv1.DataVolumeStatus{Phase: cdiv1.ImportInProgress}, nil},
		"pending":          {http, "", cdiv1.DataVolumeStatus{Phase: cdiv1.Pending}, &event{corev1.EventTypeNormal, "Pending", "PVC disk Pending"}},
		"import scheduled": {http, cdiv1.Pending, cdiv1.DataVolumeStatus{Phase: cdiv1.ImportScheduled, ClaimName: "disk"}, &event{corev1.EventTypeNormal, "ImportScheduled", "Import into disk scheduled"}},
		"import running":   {http, cdiv1.ImportScheduled, cdiv1.DataVolumeStatus{Phase: cdiv1.ImportInProgress}, &event{corev1.EventTypeNormal, "ImportInProgress", "Import into disk in progress"}},
		"imported":         {http, cdiv1.ImportInProgress, cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded}, &event{corev1.EventTypeNormal, "ImportSucceeded", "Successfully imported into PVC disk"}},
		"import failed":    {http, cdiv1.ImportInProgress, failed, &event{corev1.EventTypeWarning, "ImportFailed", "Import into disk failed: sha256 of the image is ab, want cd"}},
		"clone scheduled":  {clone, cdiv1.Pending, cdiv1.DataVolumeStatus{Phase: cdiv1.CloneScheduled}, &event{corev1.EventTypeNormal, "CloneScheduled", "Cloning from golden/os into ns/disk scheduled"}},
		"cloned":           {clone, cdiv1.CloneInProgress, cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded}, &event{corev1.EventTypeNormal, "CloneSucceeded", "Successfully cloned from golden/os into ns/disk"}},
		"clone failed":     {clone, cdiv1.CloneInProgress, failed, &event{corev1.EventTypeWarning, "CloneFailed", "Clone into disk failed: sha256 of the image is ab, want cd"}},
		"upload ready":     {upload, cdiv1.UploadScheduled, cdiv1.DataVolumeStatus{Phase: cdiv1.UploadReady}, &event{corev1.EventTypeNormal, "UploadReady", "Upload into disk ready"}},
		"uploaded":         {upload, cdiv1.UploadReady, cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded}, &event{corev1.EventTypeNormal, "UploadSucceeded", "Successfully uploaded into disk"}},
	} {
		got, ok := phaseEvent(tc.dv, tc.from, tc.st)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: event %+v, want none", name, got)
		case tc.want != nil && (!ok || got != *tc.want):
			t.Errorf("%s: event %+v (%v), want %+v", name, got, ok, *tc.want)
		}
	}
}

func TestRefusedEvent(t *testing.T) {
	running := func(reason, msg string) cdiv1.DataVolumeStatus {
		return cdiv1.DataVolumeStatus{Conditions: []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeRunning, Status: corev1.ConditionFalse, Reason: reason, Message: msg}}}
	}
	quota := running("ErrExceededQuota", "exceeded quota: none")
	if ev, ok := refusedEvent(running("", ""), quota); !ok || ev.kind != corev1.EventTypeWarning || ev.reason != "ErrExceededQuota" || ev.message != "exceeded quota: none" {
		t.Errorf("newly refused: %+v %v", ev, ok)
	}
	if _, ok := refusedEvent(quota, quota); ok {
		t.Error("an event again for the same refusal")
	}
	if _, ok := refusedEvent(quota, running("Pod is running", "")); ok {
		t.Error("an event for a running import")
	}
}
