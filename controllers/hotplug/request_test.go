package hotplug

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"
)

func addOf(name, claim string) v1.VirtualMachineVolumeRequest {
	return v1.VirtualMachineVolumeRequest{AddVolumeOptions: &v1.AddVolumeOptions{Name: name, Disk: &v1.Disk{},
		VolumeSource: &v1.HotplugVolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}
}

func removeOf(name string) v1.VirtualMachineVolumeRequest {
	return v1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &v1.RemoveVolumeOptions{Name: name}}
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		disk v1.Disk
		want string
	}{
		{"default bus", v1.Disk{}, "scsi"},
		{"virtio", v1.Disk{DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}, "virtio"},
		{"sata", v1.Disk{DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}}, `bus "sata" cannot be hotplugged`},
		{"lun", v1.Disk{DiskDevice: v1.DiskDevice{LUN: &v1.LunTarget{}}}, "lun disks cannot be hotplugged"},
		{"boot order", v1.Disk{BootOrder: new(uint)}, "no boot order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := addOf("d", "c").AddVolumeOptions
			opts.Disk = &tc.disk
			err := Normalize(opts)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = string(opts.Disk.Disk.Bus)
				if opts.Disk.Name != "d" || !opts.VolumeSource.PersistentVolumeClaim.Hotpluggable {
					t.Errorf("normalized: %+v %+v", opts.Disk, opts.VolumeSource.PersistentVolumeClaim)
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if err := Normalize(&v1.AddVolumeOptions{Name: "d", Disk: &v1.Disk{}}); err == nil || !strings.Contains(err.Error(), "VolumeSource") {
		t.Errorf("no source: %v", err)
	}
}

func TestCheckAndApply(t *testing.T) {
	spec := &v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "root-dv"}}}}}
	spec.Domain.Devices.Disks = []v1.Disk{{Name: "root"}}
	for _, tc := range []struct {
		name string
		req  v1.VirtualMachineVolumeRequest
		want string
	}{
		{"same name", addOf("root", "other"), "volume with that name already exists"},
		{"same claim", addOf("x", "root-dv"), "Unable to add volume source [root-dv]"},
		{"boot volume", removeOf("root"), "because it is not hotpluggable"},
		{"missing", removeOf("gone"), "does not exist"},
		{"add", addOf("data", "data"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(spec, tc.req)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	req := addOf("data", "data-claim")
	if err := Normalize(req.AddVolumeOptions); err != nil {
		t.Fatal(err)
	}
	added := Apply(spec, req)
	if len(spec.Volumes) != 1 || len(added.Volumes) != 2 || !IsHotplug(added.Volumes[1]) || added.Domain.Devices.Disks[1].Name != "data" {
		t.Fatalf("added: %+v, original %+v", added.Volumes, spec.Volumes)
	}
	if err := Check(added, removeOf("data-claim")); err != nil {
		t.Errorf("removal by claim name: %v", err)
	}
	removed := Apply(added, removeOf("data-claim"))
	if len(removed.Volumes) != 1 || len(removed.Domain.Devices.Disks) != 1 || removed.Volumes[0].Name != "root" {
		t.Errorf("removed: %+v %+v", removed.Volumes, removed.Domain.Devices.Disks)
	}
}

func TestQueue(t *testing.T) {
	reqs, err := Queue(nil, addOf("a", "a"))
	if err != nil || len(reqs) != 1 {
		t.Fatalf("first add: %v %v", reqs, err)
	}
	if _, err := Queue(reqs, addOf("a", "a")); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second add: %v", err)
	}
	reqs, err = Queue(reqs, removeOf("a"))
	if err != nil || len(reqs) != 1 || reqs[0].RemoveVolumeOptions == nil {
		t.Fatalf("a removal replaces the pending add: %+v %v", reqs, err)
	}
	if _, err := Queue(reqs, removeOf("a")); err == nil || !strings.Contains(err.Error(), "still being processed") {
		t.Errorf("second removal: %v", err)
	}
	if _, err := Queue(reqs, addOf("a", "a")); err == nil || !strings.Contains(err.Error(), "remove volume request for volume [a] already exists") {
		t.Errorf("add while removal pending: %v", err)
	}
}
