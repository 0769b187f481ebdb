package datavolume

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// ErrSourceNotReady is returned while the DataSource a DataVolume refers
// to is missing or not Ready; the DataVolume waits for it.
var ErrSourceNotReady = errors.New("DataSource not ready")

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datasources,verbs=get;list;watch

// ResolveSource is dv's source: spec.source, or the pvc of the Ready
// DataSource that spec.sourceRef names.
func ResolveSource(ctx context.Context, c client.Reader, dv *cdiv1.DataVolume) (*cdiv1.DataVolumeSource, error) {
	ref := dv.Spec.SourceRef
	if ref == nil {
		return dv.Spec.Source, nil
	}
	ns := dv.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = *ref.Namespace
	}
	ds := &cdiv1.DataSource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: DataSource %s/%s not found", ErrSourceNotReady, ns, ref.Name)
		}
		return nil, fmt.Errorf("reading DataSource %s/%s: %w", ns, ref.Name, err)
	}
	ready := false
	for _, c := range ds.Status.Conditions {
		ready = ready || c.Type == cdiv1.DataSourceReady && c.Status == corev1.ConditionTrue
	}
	pvc := ds.Status.Source.PVC
	if !ready || pvc == nil {
		return nil, fmt.Errorf("%w: DataSource %s/%s is not Ready", ErrSourceNotReady, ns, ref.Name)
	}
	return &cdiv1.DataVolumeSource{PVC: pvc.DeepCopy()}, nil
}
