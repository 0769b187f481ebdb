package hotplug

import (
	"fmt"
	"slices"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// Claim and IsHotplug are vmisubset's, which the node's handler shares.
var (
	Claim     = vmisubset.Claim
	IsHotplug = vmisubset.IsHotplug
)

// Normalize completes an add request as KubeVirt's virt-api does: the
// disk takes the request's name and its source is hotpluggable. It
// refuses what the request lacks or what tekvirt cannot attach, naming
// the field.
func Normalize(opts *v1.AddVolumeOptions) error {
	switch {
	case opts.Name == "":
		return fmt.Errorf("AddVolumeOptions requires name to be set")
	case opts.Disk == nil:
		return fmt.Errorf("AddVolumeOptions requires disk to not be nil")
	case opts.VolumeSource == nil:
		return fmt.Errorf("AddVolumeOptions requires VolumeSource to not be nil")
	case opts.VolumeSource.DataVolume == nil && opts.VolumeSource.PersistentVolumeClaim == nil:
		return fmt.Errorf("AddVolumeOptions volumeSource needs dataVolume or persistentVolumeClaim")
	}
	opts.Disk.Name = opts.Name
	if dv := opts.VolumeSource.DataVolume; dv != nil {
		dv.Hotpluggable = true
	} else {
		opts.VolumeSource.PersistentVolumeClaim.Hotpluggable = true
	}
	d := opts.Disk
	switch {
	case d.LUN != nil:
		return fmt.Errorf("disk %q: lun disks cannot be hotplugged here; use disk type disk", d.Name)
	case d.CDRom != nil:
		return fmt.Errorf("disk %q: cdrom disks cannot be hotplugged; use disk type disk", d.Name)
	case d.Disk == nil:
		d.Disk = &v1.DiskTarget{Bus: v1.DiskBusSCSI}
	case d.Disk.Bus == "":
		d.Disk.Bus = v1.DiskBusSCSI
	}
	if b := d.Disk.Bus; b != v1.DiskBusSCSI && b != v1.DiskBusVirtio {
		return fmt.Errorf("disk %q: bus %q cannot be hotplugged; use scsi or virtio", d.Name, b)
	}
	if d.BootOrder != nil {
		return fmt.Errorf("disk %q: a hotplugged disk has no boot order", d.Name)
	}
	return nil
}

// Check refuses a request that spec's volumes do not allow, with
// KubeVirt's messages: an added volume whose name or claim is there
// already, the removal of one that is not there or was not hotplugged.
func Check(spec *v1.VirtualMachineInstanceSpec, req v1.VirtualMachineVolumeRequest) error {
	if add := req.AddVolumeOptions; add != nil {
		src := sourceName(add.VolumeSource)
		for _, vol := range spec.Volumes {
			if vol.Name == add.Name {
				return fmt.Errorf("Unable to add volume [%s] because volume with that name already exists", add.Name) //nolint:staticcheck // KubeVirt's message
			}
			if src != "" && Claim(vol) == src {
				return fmt.Errorf("Unable to add volume source [%s] because it already exists", src) //nolint:staticcheck // KubeVirt's message
			}
		}
		return nil
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		for _, vol := range spec.Volumes {
			if vol.Name != rm.Name && Claim(vol) != rm.Name {
				continue
			}
			if !IsHotplug(vol) {
				return fmt.Errorf("Unable to remove volume [%s] because it is not hotpluggable", vol.Name) //nolint:staticcheck // KubeVirt's message
			}
			return nil
		}
		return fmt.Errorf("Unable to remove volume [%s] because it does not exist", rm.Name) //nolint:staticcheck // KubeVirt's message
	}
	return fmt.Errorf("the volume request neither adds nor removes a volume")
}

func sourceName(src *v1.HotplugVolumeSource) string {
	switch {
	case src == nil:
	case src.DataVolume != nil:
		return src.DataVolume.Name
	case src.PersistentVolumeClaim != nil:
		return src.PersistentVolumeClaim.ClaimName
	}
	return ""
}

// Apply returns a copy of spec with req applied: an added volume and its
// disk appended, a removed one (named by volume or claim) dropped with its
// disk. Check says first whether it applies.
func Apply(spec *v1.VirtualMachineInstanceSpec, req v1.VirtualMachineVolumeRequest) *v1.VirtualMachineInstanceSpec {
	out := spec.DeepCopy()
	if add := req.AddVolumeOptions; add != nil {
		vol := v1.Volume{Name: add.Name}
		if dv := add.VolumeSource.DataVolume; dv != nil {
			vol.DataVolume = dv.DeepCopy()
		} else {
			vol.PersistentVolumeClaim = add.VolumeSource.PersistentVolumeClaim.DeepCopy()
		}
		disk := add.Disk.DeepCopy()
		disk.Name = add.Name
		out.Volumes = append(out.Volumes, vol)
		out.Domain.Devices.Disks = append(out.Domain.Devices.Disks, *disk)
		return out
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		var gone string
		out.Volumes = slices.DeleteFunc(out.Volumes, func(vol v1.Volume) bool {
			if vol.Name == rm.Name || Claim(vol) == rm.Name {
				gone = vol.Name
				return true
			}
			return false
		})
		out.Domain.Devices.Disks = slices.DeleteFunc(out.Domain.Devices.Disks, func(d v1.Disk) bool { return d.Name == gone })
	}
	return out
}

// Queue adds req to a VM's pending volume requests as KubeVirt's virt-api
// does: one add per volume; a removal drops a pending add of the volume
// and is refused while another removal of it is pending.
func Queue(reqs []v1.VirtualMachineVolumeRequest, req v1.VirtualMachineVolumeRequest) ([]v1.VirtualMachineVolumeRequest, error) {
	adds := func(r v1.VirtualMachineVolumeRequest, name string) bool {
		return r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == name
	}
	removes := func(r v1.VirtualMachineVolumeRequest, name string) bool {
		return r.RemoveVolumeOptions != nil && r.RemoveVolumeOptions.Name == name
	}
	if add := req.AddVolumeOptions; add != nil {
		for _, r := range reqs {
			if adds(r, add.Name) {
				return nil, fmt.Errorf("add volume request for volume [%s] already exists", add.Name)
			}
			if removes(r, add.Name) {
				return nil, fmt.Errorf("unable to add volume since a remove volume request for volume [%s] already exists and is still being processed", add.Name)
			}
		}
		return append(slices.Clone(reqs), req), nil
	}
	name := req.RemoveVolumeOptions.Name
	var out []v1.VirtualMachineVolumeRequest
	for _, r := range reqs {
		if removes(r, name) {
			return nil, fmt.Errorf("a remove volume request for volume [%s] already exists and is still being processed", name)
		}
		if !adds(r, name) {
			out = append(out, r)
		}
	}
	return append(out, req), nil
}
