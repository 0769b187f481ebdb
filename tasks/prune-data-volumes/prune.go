package prunedatavolumes

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/importcron"
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
	importcron.NewestFirst(list.Items)
	var deleted []string
	for _, dv := range importcron.Outdated(list.Items, p.Keep, inUse) {
		if err := c.Delete(ctx, &dv); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting DataVolume %s/%s: %w", dv.Namespace, dv.Name, err)
		}
		fmt.Fprintf(out, "DataVolume %s/%s deleted\n", dv.Namespace, dv.Name)
		deleted = append(deleted, dv.Name)
	}
	fmt.Fprintf(out, "%d DataVolume(s) matching %q in %s, %d deleted\n", len(list.Items), p.Selector, p.Namespace, len(deleted))
	return deleted, nil
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
