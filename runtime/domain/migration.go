package domain

import (
	"strings"

	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"
)

// LocalDisks are the target devices of def's disks that a live migration
// copies (block migration): every writable disk whose volume is not a
// claim. Claims are shared (ReadWriteMany) and stay where they are;
// read-only disks are the same file on the target.
func LocalDisks(vmi *v1.VirtualMachineInstance, def *libvirtxml.Domain) []string {
	claims := map[string]bool{}
	for _, vol := range vmi.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil || vol.DataVolume != nil {
			claims[vol.Name] = true
		}
	}
	var out []string
	if def.Devices == nil {
		return nil
	}
	for _, d := range def.Devices.Disks {
		if d.ReadOnly != nil || d.Target == nil || d.Alias == nil {
			continue
		}
		name, ok := strings.CutPrefix(d.Alias.Name, "ua-")
		if !ok || claims[name] {
			continue
		}
		out = append(out, d.Target.Dev)
	}
	return out
}
