package vmisubset

import v1 "kubevirt.io/api/core/v1"

// Claim is the PersistentVolumeClaim a volume uses (a DataVolume's claim
// has its name), or "".
func Claim(vol v1.Volume) string {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName
	case vol.DataVolume != nil:
		return vol.DataVolume.Name
	}
	return ""
}

// IsHotplug reports whether vol is hotpluggable: its claim reaches the
// running domain through an attachment Pod, never through the launcher
// Pod, and the domain starts without it.
func IsHotplug(vol v1.Volume) bool {
	return vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.Hotpluggable ||
		vol.DataVolume != nil && vol.DataVolume.Hotpluggable
}
