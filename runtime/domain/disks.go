package domain

import (
	"fmt"
	"reflect"
	"strings"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// supportedSources are the volume sources the node can prepare as files.
var supportedSources = map[string]bool{
	"containerDisk": true, "persistentVolumeClaim": true, "dataVolume": true, "cloudInitNoCloud": true,
}

// ConfigureDisks attaches every disk of spec.domain.devices.disks from the
// file its volume was prepared as. Virtio disks are vdX, SATA disks and
// CD-ROMs sdX, in the order listed.
func ConfigureDisks(vmi *v1.VirtualMachineInstance, opts *Options, d *libvirtxml.Domain) error {
	volumes := map[string]int{}
	hotplugged := map[string]bool{}
	var errs []string
	for i, v := range vmi.Spec.Volumes {
		volumes[v.Name] = i
		if vmisubset.IsHotplug(v) {
			// Attached to the running domain once its claim is on the node.
			hotplugged[v.Name] = true
			continue
		}
		if src := sourceName(v.VolumeSource); !supportedSources[src] {
			errs = append(errs, fmt.Sprintf("spec.volumes[%d].%s (volume %q) is not supported; supported: containerDisk, persistentVolumeClaim, dataVolume, cloudInitNoCloud", i, src, v.Name))
		}
	}
	used := map[string]bool{}
	next := map[string]int{}
	for i, disk := range vmi.Spec.Domain.Devices.Disks {
		field := fmt.Sprintf("spec.domain.devices.disks[%d]", i)
		if _, ok := volumes[disk.Name]; !ok {
			errs = append(errs, fmt.Sprintf("%s: no volume named %q", field, disk.Name))
			continue
		}
		used[disk.Name] = true
		if hotplugged[disk.Name] {
			continue
		}
		dd, err := diskDevice(field, disk, opts, next)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		d.Devices.Disks = append(d.Devices.Disks, dd)
	}
	for i, v := range vmi.Spec.Volumes {
		if !used[v.Name] {
			errs = append(errs, fmt.Sprintf("spec.volumes[%d] %q has no disk in spec.domain.devices.disks", i, v.Name))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	// SCSI disks, hotplugged ones first of all, sit on one virtio-scsi
	// controller every domain has, as KubeVirt's.
	d.Devices.Controllers = append(d.Devices.Controllers, libvirtxml.DomainController{Type: "scsi", Index: ptrUint(0), Model: "virtio-scsi"})
	return nil
}

func ptrUint(u uint) *uint { return &u }

// HotplugDisk is the libvirt disk of a hotplugged volume's disk, backed by
// vol (opened by the launcher and passed as vol.FDGroup), on the first
// free target of its bus among the domain's disks.
func HotplugDisk(disk v1.Disk, vol Volume, existing []libvirtxml.DomainDisk) (libvirtxml.DomainDisk, error) {
	field := "disk " + disk.Name
	next := map[string]int{}
	taken := map[string]bool{}
	for _, d := range existing {
		if d.Target != nil {
			taken[d.Target.Dev] = true
		}
	}
	dd, err := diskDevice(field, disk, &Options{Volumes: map[string]Volume{disk.Name: vol}}, next)
	if err != nil {
		return dd, err
	}
	prefix := dd.Target.Dev[:2]
	for i := 0; i < 26; i++ {
		if dev := prefix + string(rune('a'+i)); !taken[dev] {
			dd.Target.Dev = dev
			return dd, nil
		}
	}
	return dd, fmt.Errorf("%s: no free %sX target left", field, prefix)
}

func diskDevice(field string, disk v1.Disk, opts *Options, next map[string]int) (libvirtxml.DomainDisk, error) {
	if err := unsupportedDiskFields(field, disk); err != nil {
		return libvirtxml.DomainDisk{}, err
	}
	vol, ok := opts.Volumes[disk.Name]
	if !ok {
		return libvirtxml.DomainDisk{}, fmt.Errorf("%s: volume %q was not prepared on the node", field, disk.Name)
	}
	device, bus, readOnly, err := deviceAndBus(field, disk, vol.ReadOnly)
	if err != nil {
		return libvirtxml.DomainDisk{}, err
	}
	prefix := map[v1.DiskBus]string{v1.DiskBusVirtio: "vd", v1.DiskBusSATA: "sd", v1.DiskBusSCSI: "sd"}[bus]
	format := vol.Format
	if format == "" {
		format = "raw"
	}
	dd := libvirtxml.DomainDisk{
		Device: device,
		Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format, Cache: string(disk.Cache)},
		Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: vol.Path, FDGroup: vol.FDGroup}},
		Target: &libvirtxml.DomainDiskTarget{Dev: prefix + string(rune('a'+next[prefix])), Bus: string(bus)},
		Serial: disk.Serial,
		Alias:  &libvirtxml.DomainAlias{Name: "ua-" + disk.Name},
	}
	next[prefix]++
	if readOnly {
		dd.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	}
	if disk.BootOrder != nil {
		dd.Boot = &libvirtxml.DomainDeviceBoot{Order: *disk.BootOrder}
	}
	return dd, nil
}

// deviceAndBus reads the device kind, bus and read-only flag of a disk:
// disks default to virtio, CD-ROMs to SATA and are always read-only.
func deviceAndBus(field string, disk v1.Disk, readOnly bool) (string, v1.DiskBus, bool, error) {
	device, bus := "disk", v1.DiskBusVirtio
	switch {
	case disk.CDRom != nil:
		device, bus, readOnly = "cdrom", v1.DiskBusSATA, true
		if disk.CDRom.Bus != "" {
			bus = disk.CDRom.Bus
		}
	case disk.Disk != nil:
		if disk.Disk.Bus != "" {
			bus = disk.Disk.Bus
		}
		if disk.Disk.PciAddress != "" {
			return "", "", false, fmt.Errorf("%s.disk.pciAddress is not supported", field)
		}
		readOnly = readOnly || disk.Disk.ReadOnly
	case disk.LUN != nil:
		return "", "", false, fmt.Errorf("%s.lun is not supported", field)
	}
	supported := (device == "disk" && (bus == v1.DiskBusVirtio || bus == v1.DiskBusSATA || bus == v1.DiskBusSCSI)) || (device == "cdrom" && bus == v1.DiskBusSATA)
	if !supported {
		return "", "", false, fmt.Errorf("%s: bus %q is not supported (disks: virtio, sata, scsi; cdrom: sata)", field, bus)
	}
	return device, bus, readOnly, nil
}

func unsupportedDiskFields(field string, disk v1.Disk) error {
	var bad []string
	if disk.IO != "" {
		bad = append(bad, "io")
	}
	if disk.BlockSize != nil {
		bad = append(bad, "blockSize")
	}
	if disk.Shareable != nil && *disk.Shareable {
		bad = append(bad, "shareable")
	}
	if disk.DedicatedIOThread != nil && *disk.DedicatedIOThread {
		bad = append(bad, "dedicatedIOThread")
	}
	if disk.Tag != "" {
		bad = append(bad, "tag")
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s.%s not supported", field, field, strings.Join(bad, ", "+field+"."))
}

// sourceName is the JSON name of the one volume source set.
func sourceName(src v1.VolumeSource) string {
	v := reflect.ValueOf(src)
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0]
		}
	}
	return "<none>"
}
