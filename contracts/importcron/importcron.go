package importcron

import (
	"sort"
	"time"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// CreatedAnnotation records when a DataVolume was made, to the nanosecond
// (creationTimestamp has whole seconds); a DataImportCron sets it on its
// imports.
const CreatedAnnotation = "tekvirt.io/import-created"

// NewestFirst sorts dvs by creation (CreatedAnnotation, else
// creationTimestamp), newest first; equal times by name, last first.
func NewestFirst(dvs []cdiv1.DataVolume) {
	created := func(dv *cdiv1.DataVolume) time.Time {
		if t, err := time.Parse(time.RFC3339Nano, dv.Annotations[CreatedAnnotation]); err == nil {
			return t
		}
		return dv.CreationTimestamp.Time
	}
	sort.SliceStable(dvs, func(i, j int) bool {
		a, b := created(&dvs[i]), created(&dvs[j])
		if !a.Equal(b) {
			return a.After(b)
		}
		return dvs[i].Name > dvs[j].Name
	})
}

// Outdated returns the DataVolumes of newestFirst (sorted by NewestFirst)
// to delete: all but the keep newest, never the one named inUse.
func Outdated(newestFirst []cdiv1.DataVolume, keep int, inUse string) []cdiv1.DataVolume {
	var out []cdiv1.DataVolume
	for i, dv := range newestFirst {
		if i >= keep && dv.Name != inUse {
			out = append(out, dv)
		}
	}
	return out
}
