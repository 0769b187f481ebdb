package domain

import (
	"testing"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// TestHotplugVolumesWaitForTheRunningDomain: a hotpluggable volume's disk
// is not in the domain that starts; HotplugDisk puts it on the first free
// target of its bus, with its serial and descriptor.
func TestHotplugVolumesWaitForTheRunningDomain(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.Volumes = []v1.Volume{
		{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
		{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data", Hotpluggable: true}}},
	}
	scsi := v1.Disk{Name: "data", Serial: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}}
	vmi.Spec.Domain.Devices.Disks = []v1.Disk{{Name: "root", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}}, scsi}
	d := &libvirtxml.Domain{Devices: &libvirtxml.DomainDeviceList{}}
	opts := &Options{Volumes: map[string]Volume{"root": {Path: "/r.qcow2", Format: "qcow2"}}}
	if err := ConfigureDisks(vmi, opts, d); err != nil {
		t.Fatal(err)
	}
	if len(d.Devices.Disks) != 1 || d.Devices.Disks[0].Target.Dev != "sda" {
		t.Fatalf("boot disks: %+v", d.Devices.Disks)
	}
	if c := d.Devices.Controllers; len(c) != 1 || c[0].Type != "scsi" || c[0].Model != "virtio-scsi" {
		t.Errorf("controllers: %+v", c)
	}
	dd, err := HotplugDisk(scsi, Volume{Path: "/hotplug/data", Format: "raw", FDGroup: "hotplug-data"}, d.Devices.Disks)
	if err != nil {
		t.Fatal(err)
	}
	if dd.Target.Dev != "sdb" || dd.Target.Bus != "scsi" || dd.Serial != "data" || dd.Source.File.FDGroup != "hotplug-data" || dd.Alias.Name != "ua-data" {
		t.Errorf("hotplugged disk: target %+v serial %q source %+v alias %+v", dd.Target, dd.Serial, dd.Source.File, dd.Alias)
	}
	virtio := v1.Disk{Name: "v", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}
	if dd, err := HotplugDisk(virtio, Volume{Path: "/p"}, d.Devices.Disks); err != nil || dd.Target.Dev != "vda" {
		t.Errorf("virtio: %+v %v", dd.Target, err)
	}
}
