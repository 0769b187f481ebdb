package dataimportcron

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/importcron"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// Label and annotation of the DataVolumes a DataImportCron creates, as
// CDI's; they also carry importcron.CreatedAnnotation, so that imports
// made in the same second are told apart.
const (
	CronLabel        = "cdi.kubevirt.io/dataImportCron"
	DigestAnnotation = "cdi.kubevirt.io/storage.import.sourceDesiredDigest"
)

// DefaultImportsToKeep is how many imports are kept when importsToKeep is unset.
const DefaultImportsToKeep = 3

// Supported names the part of a DataImportCron this controller cannot
// serve; the admission webhook rejects such crons with it.
func Supported(c *cdiv1.DataImportCron) error {
	if _, err := cron.ParseStandard(c.Spec.Schedule); err != nil {
		return fmt.Errorf("spec.schedule %q: %w", c.Spec.Schedule, err)
	}
	if c.Spec.ManagedDataSource == "" {
		return fmt.Errorf("spec.managedDataSource is required")
	}
	src := c.Spec.Template.Spec.Source
	if src == nil || src.Registry == nil || src.Registry.URL == nil {
		return fmt.Errorf("spec.template.spec.source.registry.url is required (registry sources only)")
	}
	if _, err := imageRef(*src.Registry.URL); err != nil {
		return fmt.Errorf("spec.template.spec.source.registry.url: %w", err)
	}
	dv := &cdiv1.DataVolume{Spec: c.Spec.Template.Spec}
	if err := datavolume.Supported(dv); err != nil {
		return fmt.Errorf("spec.template: %w", err)
	}
	return nil
}

func imageRef(url string) (name.Reference, error) {
	return name.ParseReference(strings.TrimPrefix(url, "docker://"))
}

// due reports whether the schedule has fired since the last poll (always
// when there was none, so a new cron imports at once) and when it fires next.
func due(schedule string, last *metav1.Time, now time.Time) (bool, time.Time, error) {
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return false, time.Time{}, err
	}
	if last == nil {
		return true, s.Next(now), nil
	}
	next := s.Next(last.Time)
	if !now.Before(next) {
		return true, s.Next(now), nil
	}
	return false, next, nil
}

// importName names the import of digest, as CDI: the DataSource's name and
// the digest's first 12 hex digits.
func importName(c *cdiv1.DataImportCron, digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return c.Spec.ManagedDataSource + "-" + hex[:min(12, len(hex))]
}

// newImport is the template's DataVolume pinned to digest.
func newImport(c *cdiv1.DataImportCron, digest string, now time.Time) (*cdiv1.DataVolume, error) {
	ref, err := imageRef(*c.Spec.Template.Spec.Source.Registry.URL)
	if err != nil {
		return nil, err
	}
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: importName(c, digest),
			Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: *c.Spec.Template.Spec.DeepCopy(),
	}
	for k, v := range c.Spec.Template.Labels {
		dv.Labels[k] = v
	}
	for k, v := range c.Spec.Template.Annotations {
		dv.Annotations[k] = v
	}
	dv.Labels[CronLabel] = c.Name
	dv.Annotations[DigestAnnotation] = digest
	dv.Annotations[importcron.CreatedAnnotation] = now.UTC().Format(time.RFC3339Nano)
	pinned := "docker://" + ref.Context().Digest(digest).String()
	dv.Spec.Source.Registry.URL = &pinned
	return dv, nil
}

// latestSucceeded is the newest import that succeeded, or nil.
func latestSucceeded(imports []cdiv1.DataVolume) *cdiv1.DataVolume {
	for i := range imports {
		if imports[i].Status.Phase == cdiv1.Succeeded {
			return &imports[i]
		}
	}
	return nil
}
