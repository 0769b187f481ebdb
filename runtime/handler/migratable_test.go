package handler

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

func TestLiveMigratable(t *testing.T) {
	masquerade := v1.Interface{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}
	bridge := v1.Interface{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}
	secondaryBridge := v1.Interface{Name: "lan", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}
	podNet := v1.Network{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}
	lanNet := v1.Network{Name: "lan", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "lan"}}}
	containerDisk := v1.Volume{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "guest"}}}
	dv := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data-dv"}}}
	pvc := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-pvc"}}}}
	claimInfo := func(modes ...corev1.PersistentVolumeAccessMode) []v1.VolumeStatus {
		return []v1.VolumeStatus{{Name: "data", PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "data-dv", AccessModes: modes}}}
	}
	vmi := func(ifaces []v1.Interface, nets []v1.Network, vols []v1.Volume, vs []v1.VolumeStatus) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{
			Spec:   v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: ifaces}}, Networks: nets, Volumes: vols},
			Status: v1.VirtualMachineInstanceStatus{VolumeStatus: vs},
		}
	}
	annotated := vmi([]v1.Interface{bridge}, []v1.Network{podNet}, nil, nil)
	annotated.Annotations = map[string]string{v1.AllowPodBridgeNetworkLiveMigrationAnnotation: ""}
	withGPU := vmi([]v1.Interface{masquerade}, []v1.Network{podNet}, nil, nil)
	withGPU.Spec.Domain.Devices.HostDevices = []v1.HostDevice{{Name: "nic", DeviceName: "example.com/nic"}}

	for _, tc := range []struct {
		name   string
		vmi    *v1.VirtualMachineInstance
		reason string // "" means migratable
		msg    string // a part of the message
	}{
		{name: "masquerade, containerDisk", vmi: vmi([]v1.Interface{masquerade}, []v1.Network{podNet}, []v1.Volume{containerDisk}, nil)},
		{name: "no interfaces at all", vmi: vmi(nil, nil, []v1.Volume{containerDisk}, nil)},
		{name: "masquerade and a secondary bridge", vmi: vmi([]v1.Interface{masquerade, secondaryBridge}, []v1.Network{podNet, lanNet}, nil, nil)},
		{name: "only a secondary network", vmi: vmi([]v1.Interface{secondaryBridge}, []v1.Network{lanNet}, nil, nil)},
		{name: "a ReadWriteMany DataVolume", vmi: vmi([]v1.Interface{masquerade}, []v1.Network{podNet}, []v1.Volume{containerDisk, dv}, claimInfo(corev1.ReadWriteOnce, corev1.ReadWriteMany))},
		{name: "a ReadWriteOnce DataVolume", vmi: vmi([]v1.Interface{masquerade}, []v1.Network{podNet}, []v1.Volume{dv}, claimInfo(corev1.ReadWriteOnce)),
			reason: v1.VirtualMachineInstanceReasonDisksNotMigratable, msg: "cannot migrate VMI: PVC data-dv is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"},
		{name: "a claim the controller did not describe", vmi: vmi([]v1.Interface{masquerade}, []v1.Network{podNet}, []v1.Volume{pvc}, nil),
			reason: v1.VirtualMachineInstanceReasonDisksNotMigratable, msg: "Unable to determine if PVC data-pvc is shared"},
		{name: "the disk's reason comes before the interface's", vmi: vmi([]v1.Interface{bridge}, []v1.Network{podNet}, []v1.Volume{dv}, claimInfo(corev1.ReadWriteOnce)),
			reason: v1.VirtualMachineInstanceReasonDisksNotMigratable, msg: "PVC data-dv is not shared"},
		{name: "bridge on the pod network", vmi: vmi([]v1.Interface{bridge}, []v1.Network{podNet}, nil, nil),
			reason: v1.VirtualMachineInstanceReasonInterfaceNotMigratable, msg: "cannot migrate VMI which does not use masquerade, bridge with kubevirt.io/allow-pod-bridge-network-live-migration VM annotation"},
		{name: "bridge on the pod network, allowed by the annotation", vmi: annotated},
		{name: "a host device", vmi: withGPU, reason: v1.VirtualMachineInstanceReasonHostDeviceNotMigratable, msg: "VMI uses a PCI host devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, msg := liveMigratable(tc.vmi)
			if ok != (tc.reason == "") || reason != tc.reason || !strings.Contains(msg, tc.msg) {
				t.Fatalf("liveMigratable = %v, %q, %q; want reason %q with %q", ok, reason, msg, tc.reason, tc.msg)
			}
			now := metav1.NewTime(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
			var st v1.VirtualMachineInstanceStatus
			setLiveMigratable(&st, tc.vmi, now)
			c := findCond(st, v1.VirtualMachineInstanceIsMigratable)
			want := corev1.ConditionTrue
			if tc.reason != "" {
				want = corev1.ConditionFalse
			}
			if c == nil || c.Status != want || c.Reason != tc.reason || c.Message != msg {
				t.Fatalf("condition %+v, want %s %q", c, want, tc.reason)
			}
		})
	}
}
