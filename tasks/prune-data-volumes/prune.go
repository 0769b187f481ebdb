package prunedatavolumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Params are the task's params.
type Params struct {
	Namespace string
	// Selector picks the DataVolumes; it must not be empty.
	Selector string
	// Keep is how many of the newest are kept.
	Keep int
	// DataSource names a DataSource whose DataVolume is kept whatever its age.
	DataSource string
}

// Run deletes the DataVolumes p selects beyond the newest p.Keep, never
// the one p.DataSource points at, and returns the names it deleted.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) ([]string, error) {
	if p.Selector == "" {
		return nil, errors.New("param selector is empty: give a label selector for the DataVolumes to prune")
	}
	sel, err := labels.Parse(p.Selector)
	if err != nil {
		return nil, fmt.Errorf("param selector %q: %w", p.Selector, err)
	}
	if p.Keep < 0 {
		return nil, fmt.Errorf("param keep is %d: want 0 or more", p.Keep)
	}
	inUse, err := dataSourceClaim(ctx, c, p.Namespace, p.DataSource)
	if err != nil {
		return nil, err
	}
	list := &cdiv1.DataVolumeList{}
	if err := c.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing DataVolumes %q in %s: %w", p.Selector, p.Namespace, err)
	}
	NewestFirst(list.Items)
	var deleted []string
	for _, dv := range Outdated(list.Items, p.Keep, inUse) {
		if err := c.Delete(ctx, &dv); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting DataVolume %s/%s: %w", dv.Namespace, dv.Name, err)
		}
		fmt.Fprintf(out, "DataVolume %s/%s deleted\n", dv.Namespace, dv.Name)
		deleted = append(deleted, dv.Name)
	}
	fmt.Fprintf(out, "%d DataVolume(s) matching %q in %s, %d deleted\n", len(list.Items), p.Selector, p.Namespace, len(deleted))
	return deleted, nil
}

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

// dataSourceClaim is the PVC (in namespace) the named DataSource points at,
// or "" when none is named.
func dataSourceClaim(ctx context.Context, c client.Client, namespace, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	ds := &cdiv1.DataSource{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ds)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading DataSource %s/%s: %w", namespace, name, err)
	}
	if pvc := ds.Spec.Source.PVC; pvc != nil && (pvc.Namespace == "" || pvc.Namespace == namespace) {
		return pvc.Name, nil
	}
	return "", nil
}
