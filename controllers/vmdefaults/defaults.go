package vmdefaults

import (
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1 "kubevirt.io/api/core/v1"
)

// Architecture and MachineType are what a VMI that names none runs as.
const (
	Architecture = "amd64"
	MachineType  = "pc"
)

// firmwareNamespace is the UUID namespace KubeVirt derives a VM's firmware
// UUID in, so that a VM gets the same guest-visible UUID as on KubeVirt.
var firmwareNamespace = uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

// FirmwareUUID is the stable firmware UUID of the VM name: the same on
// every start, as KubeVirt's.
func FirmwareUUID(name string) types.UID {
	return types.UID(uuid.NewSHA1(firmwareNamespace, []byte(name)).String())
}

// VMISpec writes every default into spec (see the package comment); the
// firmware UUID only if uid is not empty and spec names none.
func VMISpec(spec *v1.VirtualMachineInstanceSpec, uid types.UID) {
	if spec.Architecture == "" {
		spec.Architecture = Architecture
	}
	if spec.Domain.Machine == nil {
		spec.Domain.Machine = &v1.Machine{}
	}
	if spec.Domain.Machine.Type == "" {
		spec.Domain.Machine.Type = MachineType
	}
	resources(&spec.Domain)
	topology(&spec.Domain)
	Network(spec)
	VolumeDisks(spec)
	disks(spec.Domain.Devices.Disks)
	Firmware(spec, uid)
}

// Firmware gives spec the firmware UUID uid unless it has one (or uid is
// empty).
func Firmware(spec *v1.VirtualMachineInstanceSpec, uid types.UID) {
	if uid == "" {
		return
	}
	if spec.Domain.Firmware == nil {
		spec.Domain.Firmware = &v1.Firmware{}
	}
	if spec.Domain.Firmware.UUID == "" {
		spec.Domain.Firmware.UUID = uid
	}
}

// resources derives memory.guest and the memory request from each other
// and the CPU request from the CPU limit.
func resources(d *v1.DomainSpec) {
	r := &d.Resources
	if d.Memory == nil || d.Memory.Guest == nil {
		var guest *corev1.ResourceList
		switch {
		case !r.Requests.Memory().IsZero():
			guest = &r.Requests
		case !r.Limits.Memory().IsZero():
			guest = &r.Limits
		}
		if guest != nil {
			if d.Memory == nil {
				d.Memory = &v1.Memory{}
			}
			q := (*guest)[corev1.ResourceMemory]
			d.Memory.Guest = &q
		}
	}
	if _, ok := r.Requests[corev1.ResourceMemory]; !ok && d.Memory != nil && d.Memory.Guest != nil {
		setRequest(r, corev1.ResourceMemory, *d.Memory.Guest)
	}
	if cpu, ok := r.Limits[corev1.ResourceCPU]; ok {
		if _, set := r.Requests[corev1.ResourceCPU]; !set {
			setRequest(r, corev1.ResourceCPU, cpu)
		}
	}
}

func setRequest(r *v1.ResourceRequirements, name corev1.ResourceName, q resource.Quantity) {
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	r.Requests[name] = q.DeepCopy()
}

// topology gives a VMI without a CPU topology one socket per CPU of its
// limit (or request), as KubeVirt's: sockets perform best.
func topology(d *v1.DomainSpec) {
	if c := d.CPU; c != nil && (c.Sockets != 0 || c.Cores != 0 || c.Threads != 0) {
		return
	}
	if d.CPU == nil {
		d.CPU = &v1.CPU{}
	}
	sockets := uint32(1)
	if q, ok := d.Resources.Limits[corev1.ResourceCPU]; ok {
		sockets = uint32(max(q.Value(), 1))
	} else if q, ok := d.Resources.Requests[corev1.ResourceCPU]; ok {
		sockets = uint32(max(q.Value(), 1))
	}
	d.CPU.Sockets, d.CPU.Cores, d.CPU.Threads = sockets, 1, 1
}

// Network gives spec the pod network with the masquerade binding when it
// declares no interface and no network and does not turn that off.
func Network(spec *v1.VirtualMachineInstanceSpec) {
	if auto := spec.Domain.Devices.AutoattachPodInterface; auto != nil && !*auto {
		return
	}
	if len(spec.Networks) != 0 || len(spec.Domain.Devices.Interfaces) != 0 {
		return
	}
	spec.Domain.Devices.Interfaces = []v1.Interface{*v1.DefaultMasqueradeNetworkInterface()}
	spec.Networks = []v1.Network{*v1.DefaultPodNetwork()}
}

// VolumeDisks adds a disk for every volume that has neither a disk nor a
// filesystem.
func VolumeDisks(spec *v1.VirtualMachineInstanceSpec) {
	used := map[string]bool{}
	for _, d := range spec.Domain.Devices.Disks {
		used[d.Name] = true
	}
	for _, fs := range spec.Domain.Devices.Filesystems {
		used[fs.Name] = true
	}
	for _, v := range spec.Volumes {
		if !used[v.Name] {
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: v.Name})
			used[v.Name] = true
		}
	}
}

// disks gives every disk a device (a disk), every disk and CD-ROM a bus
// (SATA, KubeVirt's amd64 default), and CD-ROMs read-only with the tray
// closed.
func disks(list []v1.Disk) {
	for i := range list {
		d := &list[i].DiskDevice
		v1.SetDefaults_DiskDevice(d)
		switch {
		case d.Disk != nil && d.Disk.Bus == "":
			d.Disk.Bus = v1.DiskBusSATA
		case d.CDRom != nil:
			v1.SetDefaults_CDRomTarget(d.CDRom)
			if d.CDRom.Bus == "" {
				d.CDRom.Bus = v1.DiskBusSATA
			}
		}
	}
}
