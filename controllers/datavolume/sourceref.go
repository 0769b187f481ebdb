package datavolume

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
)

// ErrSourceNotReady is returned while the DataSource a DataVolume refers
// to is missing or not Ready; the DataVolume waits for it.
var ErrSourceNotReady = errors.New("DataSource not ready")

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datasources,verbs=get;list;watch

// SourceRefKey is the DataSource dv's spec.sourceRef names (its namespace
// defaults to dv's), or nil without one.
func SourceRefKey(dv *cdiv1.DataVolume) *types.NamespacedName {
	ref := dv.Spec.SourceRef
	if ref == nil {
		return nil
	}
	key := &types.NamespacedName{Namespace: dv.Namespace, Name: ref.Name}
	if ref.Namespace != nil && *ref.Namespace != "" {
		key.Namespace = *ref.Namespace
	}
	return key
}

// CloneSources are where dv, with its source resolved, reads from: the
// DataSource it was referred through (ds, or nil) and the PVC.
func CloneSources(dv *cdiv1.DataVolume, ds *types.NamespacedName) []requester.Source {
	var sources []requester.Source
	if ds != nil {
		sources = append(sources, requester.Source{Kind: "DataSource", Namespace: ds.Namespace, Name: ds.Name})
	}
	if src := dv.Spec.Source; src != nil && src.PVC != nil {
		ns := src.PVC.Namespace
		if ns == "" {
			ns = dv.Namespace
		}
		sources = append(sources, requester.Source{Kind: "PVC", Namespace: ns, Name: src.PVC.Name})
	}
	if src := dv.Spec.Source; src != nil && src.Snapshot != nil {
		ns := src.Snapshot.Namespace
		if ns == "" {
			ns = dv.Namespace
		}
		sources = append(sources, requester.Source{Kind: "VolumeSnapshot", Namespace: ns, Name: src.Snapshot.Name})
	}
	return sources
}

// ResolveSource is dv's source: spec.source, or the pvc of the Ready
// DataSource that spec.sourceRef names.
func ResolveSource(ctx context.Context, c client.Reader, dv *cdiv1.DataVolume) (*cdiv1.DataVolumeSource, error) {
	key := SourceRefKey(dv)
	if key == nil {
		return dv.Spec.Source, nil
	}
	ds := &cdiv1.DataSource{}
	if err := c.Get(ctx, *key, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: DataSource %s not found", ErrSourceNotReady, key)
		}
		return nil, fmt.Errorf("reading DataSource %s: %w", key, err)
	}
	ready := false
	for _, c := range ds.Status.Conditions {
		ready = ready || c.Type == cdiv1.DataSourceReady && c.Status == corev1.ConditionTrue
	}
	pvc := ds.Status.Source.PVC
	if !ready || pvc == nil {
		return nil, fmt.Errorf("%w: DataSource %s is not Ready", ErrSourceNotReady, key)
	}
	return &cdiv1.DataVolumeSource{PVC: pvc.DeepCopy()}, nil
}
