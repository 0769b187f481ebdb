package vmi

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

func claimVolumes(vmi *v1.VirtualMachineInstance) *v1.VirtualMachineInstance {
	vmi.Spec.Volumes = []v1.Volume{
		{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "guest"}}},
		{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data-dv"}}},
		{Name: "logs", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "logs"}}}},
	}
	return vmi
}

func rwxClaim(name string) *corev1.PersistentVolumeClaim {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: &fs,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Capacity: corev1.ResourceList{corev1.ResourceStorage: qty("2Gi")}},
	}
}

func TestVolumeStatus(t *testing.T) {
	vmi := claimVolumes(guestVMI())
	vmi.Status.VolumeStatus = []v1.VolumeStatus{{Name: "root", Target: "vda"}}
	got := VolumeStatus(vmi, map[string]*corev1.PersistentVolumeClaim{"data-dv": rwxClaim("data-dv")})
	fs := corev1.PersistentVolumeFilesystem
	want := []v1.VolumeStatus{
		{Name: "root", Target: "vda"},
		{Name: "data", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "data-dv",
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: &fs,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: qty("2Gi")}, Requests: corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("VolumeStatus =\n%+v\nwant (the missing claim logs left out, root kept)\n%+v", got, want)
	}
}

// TestScheduledVMIDescribesItsClaims: when its Pod is bound, the VMI says
// what its claims are, for the node's handler to judge migration by.
func TestScheduledVMIDescribesItsClaims(t *testing.T) {
	vmi := claimVolumes(guestVMI())
	f := newPodFixture(t, vmi)
	for _, pvc := range []*corev1.PersistentVolumeClaim{rwxClaim("data-dv"), rwxClaim("logs")} {
		if err := f.c.Create(context.Background(), pvc); err != nil {
			t.Fatal(err)
		}
	}
	f.reconcile()
	f.setPod(func(p *corev1.Pod) { p.UID, p.Spec.NodeName = "pod-uid-1", "node2" })
	got := f.reconcile()
	if len(got.Status.VolumeStatus) != 2 {
		t.Fatalf("volumeStatus %+v, want data and logs", got.Status.VolumeStatus)
	}
	for _, vs := range got.Status.VolumeStatus {
		if vs.PersistentVolumeClaimInfo == nil || !reflect.DeepEqual(vs.PersistentVolumeClaimInfo.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
			t.Errorf("volume %s: %+v", vs.Name, vs.PersistentVolumeClaimInfo)
		}
	}
}
