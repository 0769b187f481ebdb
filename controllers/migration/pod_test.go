package migration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

func TestTargetPod(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-1"},
		Spec: v1.VirtualMachineInstanceSpec{
			NodeSelector: map[string]string{"disk": "ssd"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
				}}}},
			Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}},
		},
		Status: v1.VirtualMachineInstanceStatus{NodeName: "node1"},
	}
	m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "mig-1"},
		Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm", AddedNodeSelector: map[string]string{"kubernetes.io/hostname": "node2", "disk": "hdd"}}}
	pod, err := TargetPod(vmi, m, "reg/launcher:1")
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[v1.MigrationJobLabel] != "mig-1" || pod.Labels["kubevirt.io/created-by"] != "vmi-1" || pod.Annotations[v1.MigrationJobNameAnnotation] != "m" {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if pod.Spec.NodeSelector["disk"] != "ssd" || pod.Spec.NodeSelector["kubernetes.io/hostname"] != "node2" || len(vmi.Spec.NodeSelector) != 1 {
		t.Errorf("node selector %v (the VMI's: %v): want the added keys, and the VMI's value where both name a key", pod.Spec.NodeSelector, vmi.Spec.NodeSelector)
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("terms %+v", terms)
	}
	for _, term := range terms {
		if len(term.MatchExpressions) != 1 || len(term.MatchFields) != 1 || term.MatchFields[0].Key != "metadata.name" ||
			term.MatchFields[0].Operator != corev1.NodeSelectorOpNotIn || term.MatchFields[0].Values[0] != "node1" {
			t.Errorf("a term does not keep the VMI off its node: %+v", term)
		}
	}
	if len(vmi.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields) != 0 {
		t.Error("the VMI's own affinity was changed")
	}
	plain := vmi.DeepCopy()
	plain.Spec.Affinity = nil
	pod, err = TargetPod(plain, m, "reg/launcher:1")
	if err != nil {
		t.Fatal(err)
	}
	if f := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields; len(f) != 1 || f[0].Values[0] != "node1" {
		t.Errorf("no affinity: %+v", pod.Spec.Affinity)
	}
}

func TestMethod(t *testing.T) {
	claim := v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "dv"}}}
	pvc := v1.Volume{Name: "pvc", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}}
	seed := v1.Volume{Name: "seed", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{}}}
	shared, local := true, false
	for name, tc := range map[string]struct {
		vols []v1.Volume
		want v1.VirtualMachineInstanceMigrationMethod
	}{
		"claims only":           {[]v1.Volume{claim, pvc}, v1.LiveMigration},
		"claims and a seed":     {[]v1.Volume{claim, seed}, v1.BlockMigration},
		"containerDisk":         {[]v1.Volume{{Name: "c", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{}}}}, v1.BlockMigration},
		"shared host disk":      {[]v1.Volume{claim, {Name: "h", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Shared: &shared}}}}, v1.LiveMigration},
		"host disk of one node": {[]v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostDisk: &v1.HostDisk{Shared: &local}}}}, v1.BlockMigration},
	} {
		vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{Volumes: tc.vols}}
		if got := Method(vmi); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
