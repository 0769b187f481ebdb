package datasource

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func TestReadiness(t *testing.T) {
	ref := &cdiv1.DataVolumeSourcePVC{Namespace: "os", Name: "fedora"}
	bound := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pending := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	dv := func(p cdiv1.DataVolumePhase) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "os", Name: "fedora"}, Status: cdiv1.DataVolumeStatus{Phase: p}}
	}
	for _, tc := range []struct {
		name   string
		obs    observed
		status corev1.ConditionStatus
		reason string
		msg    string
	}{
		{"unsupported", observed{invalid: "spec.source.snapshot is not supported"}, corev1.ConditionFalse, "UnsupportedSource", "spec.source.snapshot is not supported"},
		{"no source", observed{}, corev1.ConditionFalse, "NoSource", "no source PVC"},
		{"missing claim", observed{pvc: ref}, corev1.ConditionFalse, "NotFound", "PVC os/fedora not found"},
		{"claim pending", observed{pvc: ref, claim: pending}, corev1.ConditionFalse, "NotBound", "PVC os/fedora is Pending"},
		{"importing", observed{pvc: ref, claim: bound, dv: dv(cdiv1.ImportInProgress)}, corev1.ConditionFalse, "ImportInProgress", "DataVolume os/fedora is ImportInProgress"},
		{"import failed", observed{pvc: ref, claim: bound, dv: dv(cdiv1.Failed)}, corev1.ConditionFalse, "Failed", "DataVolume os/fedora is Failed"},
		{"dv without status", observed{pvc: ref, dv: dv("")}, corev1.ConditionFalse, "Pending", "DataVolume os/fedora is Pending"},
		{"imported", observed{pvc: ref, claim: bound, dv: dv(cdiv1.Succeeded)}, corev1.ConditionTrue, "Ready", ""},
		{"plain PVC", observed{pvc: ref, claim: bound}, corev1.ConditionTrue, "Ready", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, reason, msg := readiness(tc.obs)
			if s != tc.status || reason != tc.reason || msg != tc.msg {
				t.Errorf("got %s %q %q, want %s %q %q", s, reason, msg, tc.status, tc.reason, tc.msg)
			}
		})
	}
}

func TestNextStatusKeepsTransitionTime(t *testing.T) {
	t0, t1 := metav1.Unix(100, 0), metav1.Unix(200, 0)
	ref := &cdiv1.DataVolumeSourcePVC{Namespace: "os", Name: "fedora"}
	bound := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	ds := &cdiv1.DataSource{}
	ds.Status = nextStatus(ds, observed{pvc: ref, claim: bound}, t0)
	ds.Status = nextStatus(ds, observed{pvc: ref, claim: bound}, t1)
	c := ds.Status.Conditions
	if len(c) != 1 || c[0].Status != corev1.ConditionTrue || !c[0].LastTransitionTime.Equal(&t0) || ds.Status.Source.PVC.Name != "fedora" {
		t.Fatalf("status %+v", ds.Status)
	}
	ds.Status = nextStatus(ds, observed{pvc: ref}, t1)
	if c := ds.Status.Conditions[0]; c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Equal(&t1) {
		t.Fatalf("after the PVC went: %+v", c)
	}
}
