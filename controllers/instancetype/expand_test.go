package instancetype

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

// u1medium is upstream's u1.medium: 1 vCPU, 4Gi.
func u1medium() *instancetypev1beta1.VirtualMachineInstancetypeSpec {
	return &instancetypev1beta1.VirtualMachineInstancetypeSpec{
		CPU: instancetypev1beta1.CPUInstancetype{Guest: 1}, Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("4Gi")}}
}

// bare is a VM's VMI spec that sizes nothing, as one naming an
// instancetype does.
func bare() *v1.VirtualMachineInstanceSpec {
	return &v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{
		Disks: []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{}}}, {Name: "iso", DiskDevice: v1.DiskDevice{CDRom: &v1.CDRomTarget{}}}, {Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}},
			{Name: "bare"}},
		Interfaces: []v1.Interface{{Name: "default"}},
	}}}
}

func TestApplyInstancetypeAndPreference(t *testing.T) {
	spec := bare()
	it := u1medium()
	it.CPU.Guest = 4
	it.NodeSelector = map[string]string{"zone": "a"}
	pref := &instancetypev1beta1.VirtualMachinePreferenceSpec{
		CPU:                                    &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: ptr.To(instancetypev1beta1.Cores)},
		Devices:                                &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusVirtio, PreferredCdromBus: v1.DiskBusSATA, PreferredInterfaceModel: "virtio", PreferredAutoattachGraphicsDevice: ptr.To(false)},
		PreferredTerminationGracePeriodSeconds: ptr.To(int64(30)),
		Requirements: &instancetypev1beta1.PreferenceRequirements{CPU: &instancetypev1beta1.CPUPreferenceRequirement{Guest: 2},
			Memory: &instancetypev1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse("2Gi")}},
	}
	if err := Apply(spec, it, pref); err != nil {
		t.Fatal(err)
	}
	d := spec.Domain
	if d.CPU.Sockets != 1 || d.CPU.Cores != 4 || d.CPU.Threads != 1 || !d.Memory.Guest.Equal(resource.MustParse("4Gi")) {
		t.Errorf("cpu %+v memory %v", d.CPU, d.Memory.Guest)
	}
	if spec.NodeSelector["zone"] != "a" {
		t.Errorf("nodeSelector %v", spec.NodeSelector)
	}
	disks := d.Devices.Disks
	if disks[0].Disk.Bus != v1.DiskBusVirtio || disks[1].CDRom.Bus != v1.DiskBusSATA || disks[2].Disk.Bus != v1.DiskBusSATA {
		t.Errorf("buses %v %v %v: the preference fills in only what the VM leaves unset", disks[0].Disk.Bus, disks[1].CDRom.Bus, disks[2].Disk.Bus)
	}
	if disks[3].Disk == nil || disks[3].Disk.Bus != v1.DiskBusVirtio {
		t.Errorf("a disk without a device: %+v; want a disk on the preferred bus", disks[3].DiskDevice)
	}
	if d.Devices.Interfaces[0].Model != "virtio" || *d.Devices.AutoattachGraphicsDevice || *spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("interface model %q, graphics %v, grace %v", d.Devices.Interfaces[0].Model, *d.Devices.AutoattachGraphicsDevice, *spec.TerminationGracePeriodSeconds)
	}
}

func TestTopology(t *testing.T) {
	pref := func(top instancetypev1beta1.PreferredCPUTopology, across instancetypev1beta1.SpreadAcross, ratio uint32) *instancetypev1beta1.VirtualMachinePreferenceSpec {
		p := &instancetypev1beta1.VirtualMachinePreferenceSpec{CPU: &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: &top}}
		if across != "" {
			p.CPU.SpreadOptions = &instancetypev1beta1.SpreadOptions{Across: &across, Ratio: &ratio}
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		guest uint32
		pref  *instancetypev1beta1.VirtualMachinePreferenceSpec
		want  [3]uint32
	}{
		{"no preference: sockets", 4, nil, [3]uint32{4, 1, 1}},
		{"cores", 4, pref(instancetypev1beta1.Cores, "", 0), [3]uint32{1, 4, 1}},
		{"threads (deprecated name)", 2, pref(instancetypev1beta1.DeprecatedPreferThreads, "", 0), [3]uint32{1, 1, 2}},
		{"spread sockets and cores, ratio 2", 8, pref(instancetypev1beta1.Spread, "", 0), [3]uint32{4, 2, 1}},
		{"spread sockets, cores and threads", 8, pref(instancetypev1beta1.Spread, instancetypev1beta1.SpreadAcrossSocketsCoresThreads, 2), [3]uint32{2, 2, 2}},
		{"spread cores and threads", 6, pref(instancetypev1beta1.Spread, instancetypev1beta1.SpreadAcrossCoresThreads, 2), [3]uint32{1, 3, 2}},
		{"spread that does not divide: sockets", 3, pref(instancetypev1beta1.Spread, "", 0), [3]uint32{3, 1, 1}},
	} {
		s, c, th := topology(tc.guest, tc.pref)
		if [3]uint32{s, c, th} != tc.want {
			t.Errorf("%s: %d/%d/%d, want %v", tc.name, s, c, th, tc.want)
		}
	}
}

// TestConflictsAreNamed: a VM that sizes itself and names an instancetype
// is refused naming every field both set, as KubeVirt does.
func TestConflictsAreNamed(t *testing.T) {
	spec := bare()
	spec.Domain.CPU = &v1.CPU{Cores: 2}
	spec.Domain.Memory = &v1.Memory{Guest: ptr.To(resource.MustParse("1Gi"))}
	spec.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	spec.NodeSelector = map[string]string{"x": "y"}
	it := u1medium()
	it.NodeSelector = map[string]string{"zone": "a"}
	err := Apply(spec, it, nil)
	if err == nil {
		t.Fatal("applied")
	}
	for _, want := range []string{"spec.template.spec.domain.cpu", "spec.template.spec.domain.memory.guest",
		"spec.template.spec.domain.resources.requests.cpu", "spec.template.spec.nodeSelector", "conflict with the selected instancetype"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestRequirements(t *testing.T) {
	pref := &instancetypev1beta1.VirtualMachinePreferenceSpec{Requirements: &instancetypev1beta1.PreferenceRequirements{
		CPU: &instancetypev1beta1.CPUPreferenceRequirement{Guest: 2}, Memory: &instancetypev1beta1.MemoryPreferenceRequirement{Guest: resource.MustParse("8Gi")}}}
	err := Apply(bare(), u1medium(), pref)
	if err == nil || !strings.Contains(err.Error(), "requires 2 vCPUs, the VM has 1") || !strings.Contains(err.Error(), "requires 8Gi of guest memory, the VM has 4Gi") {
		t.Fatalf("err = %v", err)
	}
	// Without an instancetype, the VM's own sizing is checked.
	own := bare()
	own.Domain.CPU = &v1.CPU{Sockets: 2}
	own.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}
	if err := Apply(own, nil, pref); err != nil {
		t.Fatalf("a VM meeting the requirements: %v", err)
	}
}

func TestUnsupportedFieldsNamed(t *testing.T) {
	it := u1medium()
	it.CPU.DedicatedCPUPlacement = ptr.To(true)
	it.GPUs = []v1.GPU{{Name: "g", DeviceName: "nvidia.com/x"}}
	err := CheckInstancetype("VirtualMachineClusterInstancetype", "u1.medium", it)
	if err == nil || !strings.Contains(err.Error(), "spec.cpu.dedicatedCPUPlacement") || !strings.Contains(err.Error(), "spec.gpus") ||
		!strings.Contains(err.Error(), "VirtualMachineClusterInstancetype u1.medium") {
		t.Errorf("err = %v", err)
	}
	if err := CheckInstancetype("VirtualMachineInstancetype", "ok", u1medium()); err != nil {
		t.Errorf("u1.medium refused: %v", err)
	}
	pref := &instancetypev1beta1.VirtualMachinePreferenceSpec{Devices: &instancetypev1beta1.DevicePreferences{PreferredDiskBus: v1.DiskBusSCSI},
		Firmware: &instancetypev1beta1.FirmwarePreferences{PreferredUseBios: ptr.To(true)}}
	err = CheckPreference("VirtualMachineClusterPreference", "fedora", pref)
	if err == nil || !strings.Contains(err.Error(), `spec.devices.preferredDiskBus: "scsi"`) || !strings.Contains(err.Error(), "spec.firmware") {
		t.Errorf("err = %v", err)
	}
}
