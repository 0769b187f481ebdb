package vmisubset

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "kubevirt.io/api/core/v1"
)

func TestCheck(t *testing.T) {
	spec := &v1.VirtualMachineInstanceSpec{
		NodeSelector:      map[string]string{"disk": "ssd"},
		PriorityClassName: "high",
		Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			Devices: v1.Devices{
				Disks: []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}},
				Interfaces: []v1.Interface{{Name: "default", MacAddress: "02:00:00:00:00:01", Ports: []v1.Port{{Port: 80}},
					InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}},
			},
		},
		Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{VMNetworkCIDR: "10.11.0.0/24", VMIPv6NetworkCIDR: "fd10::/120"}}}},
		Volumes:  []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}},
	}
	if err := Check(spec); err != nil {
		t.Fatalf("a supported spec: %v", err)
	}
	spec.Domain.Devices.Disks[0].Disk.Bus = v1.DiskBusUSB
	spec.Volumes[0].ContainerDisk.ImagePullSecret = "pull"
	spec.DNSPolicy = corev1.DNSNone
	spec.Domain.Devices.Interfaces[0].PciAddress = "0000:81:01.0"
	err := Check(spec)
	for _, want := range []string{"spec.domain.devices.interfaces[0].pciAddress", "fields not supported by tekvirt", `spec.domain.devices.disks[0].disk.bus: "usb" (supported: virtio, sata, scsi)`,
		"spec.volumes[0].containerDisk.imagePullSecret", "spec.dnsPolicy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

func TestGuestUser(t *testing.T) {
	for name, ok := range map[string]bool{
		"root": true, "cloud-user": true, "fedora": true, "_svc": true, "john.doe": true, "A1": true,
		"": false, "../../etc": false, "..": false, ".hidden": false, "a/b": false, "-x": false, "1abc": false,
		"a b": false, "root\n": false, "abcdefghijklmnopqrstuvwxyz0123456": false,
	} {
		if err := GuestUser(name); (err == nil) != ok {
			t.Errorf("GuestUser(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
