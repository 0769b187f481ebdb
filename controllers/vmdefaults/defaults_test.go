package vmdefaults

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
)

func mem(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// virtctlSpec is the VMI template `virtctl create vm --volume-containerdisk
// --cloud-init-user-data --memory=256Mi` prints: volumes without disks, no
// network, guest memory only.
func virtctlSpec() v1.VirtualMachineInstanceSpec {
	return v1.VirtualMachineInstanceSpec{
		Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: mem("256Mi")}},
		Volumes: []v1.Volume{
			{Name: "vm-containerdisk-0", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "r/guest:latest"}}},
			{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
		},
	}
}

func TestVMISpec(t *testing.T) {
	sata := v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}
	for _, tc := range []struct {
		name string
		in   func(*v1.VirtualMachineInstanceSpec)
		want func(*v1.VirtualMachineInstanceSpec)
	}{
		{"virtctl create vm", nil, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = []v1.Disk{{Name: "vm-containerdisk-0", DiskDevice: sata}, {Name: "cloudinitdisk", DiskDevice: sata}}
			s.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
			s.Networks = []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
		}},
		{"disks and buses given are kept; a cdrom is read-only with a closed tray", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = []v1.Disk{
				{Name: "cloudinitdisk", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{}}},
				{Name: "vm-containerdisk-0", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
			}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks = []v1.Disk{
				{Name: "cloudinitdisk", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{Bus: v1.DiskBusSATA, ReadOnly: ptr.To(true), Tray: v1.TrayStateClosed}}},
				{Name: "vm-containerdisk-0", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
			}
		}},
		{"no pod interface when autoattach is off", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.AutoattachPodInterface = ptr.To(false)
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Interfaces, s.Networks = nil, nil
			s.Domain.Devices.AutoattachPodInterface = ptr.To(false)
		}},
		{"a network given is kept, no default added", func(s *v1.VirtualMachineInstanceSpec) {
			s.Networks = []v1.Network{{Name: "net", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
			s.Domain.Devices.Interfaces = []v1.Interface{{Name: "net", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Networks = []v1.Network{{Name: "net", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}}
			s.Domain.Devices.Interfaces = []v1.Interface{{Name: "net", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}}}
		}},
		{"guest memory from the request", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = nil
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Memory.Guest = mem("128Mi")
			s.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
		}},
		{"guest memory from the limit, request from the guest", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Memory = nil
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Memory.Guest = mem("1Gi")
			s.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}},
		{"a request and a guest size that differ are both kept", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi")
		}},
		{"sockets and CPU request from the CPU limit", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 1, Threads: 1}
			s.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			s.Domain.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
		}},
		{"a fraction of a CPU requested is one socket", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("300m")
		}},
		{"a topology given is kept", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.CPU = &v1.CPU{Cores: 2}
		}, func(s *v1.VirtualMachineInstanceSpec) { s.Domain.CPU = &v1.CPU{Cores: 2} }},
		{"machine type and architecture given are kept", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Machine, s.Architecture = &v1.Machine{Type: "q35"}, "arm64"
		}, func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Machine, s.Architecture = &v1.Machine{Type: "q35"}, "arm64"
		}},
		{"a firmware UUID given is kept", func(s *v1.VirtualMachineInstanceSpec) {
			s.Domain.Firmware = &v1.Firmware{UUID: "given"}
		}, func(s *v1.VirtualMachineInstanceSpec) { s.Domain.Firmware.UUID = "given" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := virtctlSpec()
			if tc.in != nil {
				tc.in(&got)
			}
			VMISpec(&got, "uid")
			want := virtctlSpec()
			// What every case gets unless it says otherwise.
			want.Architecture = "amd64"
			want.Domain.Machine = &v1.Machine{Type: "pc"}
			want.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 1}
			want.Domain.Firmware = &v1.Firmware{UUID: "uid"}
			want.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
			want.Domain.Devices.Disks = []v1.Disk{{Name: "vm-containerdisk-0", DiskDevice: sata}, {Name: "cloudinitdisk", DiskDevice: sata}}
			want.Domain.Devices.Interfaces = []v1.Interface{*v1.DefaultMasqueradeNetworkInterface()}
			want.Networks = []v1.Network{*v1.DefaultPodNetwork()}
			tc.want(&want)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("defaults (-want +got):\n%s", d)
			}
			again := got.DeepCopy()
			VMISpec(again, "other")
			if d := cmp.Diff(&got, again); d != "" {
				t.Errorf("defaulting twice changes the spec (-once +twice):\n%s", d)
			}
		})
	}
}

func TestFirmwareUUIDIsKubeVirts(t *testing.T) {
	// Pinned: the guest sees this machine identity, the same as under
	// KubeVirt's firmware controller; another namespace would change every
	// VM's.
	if got := FirmwareUUID("testvm"); got != "5a9fc181-957e-5c32-9e5a-2de5e9673531" {
		t.Errorf("FirmwareUUID(testvm) = %s", got)
	}
	if FirmwareUUID("a") == FirmwareUUID("b") {
		t.Error("two names, one UUID")
	}
}
