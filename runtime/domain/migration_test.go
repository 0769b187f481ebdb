package domain

import (
	"slices"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestLocalDisks(t *testing.T) {
	vmi := cirros()
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks,
		v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
		v1.Disk{Name: "scratch", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	vmi.Spec.Volumes = append(vmi.Spec.Volumes,
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data"}}},
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "scratch"}}})
	opts := cirrosOptions()
	opts.Volumes["data"] = Volume{Path: "/disks/data/disk.img", Format: "raw"}
	opts.Volumes["scratch"] = Volume{Path: "/run/tekvirt/vmi/uid/scratch.qcow2", Format: "qcow2"}
	def, err := Convert(vmi, opts)
	if err != nil {
		t.Fatal(err)
	}
	// vda the container disk, vdb the read-only seed, vdc the claim, vdd
	// another container disk.
	if got, want := LocalDisks(vmi, def), []string{"vda", "vdd"}; !slices.Equal(got, want) {
		t.Fatalf("LocalDisks = %v, want %v (the overlays; not the seed, read-only, nor the claim, shared)", got, want)
	}
}
