package datasource

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Indexes of DataSources: by the "namespace/name" of their PVC, and of the
// DataSource they refer to.
const (
	sourceIndex = "tekvirt.io/source-pvc"
	refIndex    = "tekvirt.io/source-datasource"
)

// Reconciler reports DataSources.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datasources,verbs=get;list;watch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datasources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// Reconcile resolves one DataSource and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ds := &cdiv1.DataSource{}
	if err := r.Client.Get(ctx, req.NamespacedName, ds); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	obs, err := r.observe(ctx, ds)
	if err != nil {
		return ctrl.Result{}, err
	}
	base := ds.DeepCopy()
	ds.Status = nextStatus(ds, obs, metav1.Now())
	if err := r.Client.Status().Patch(ctx, ds, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("patching status of %s: %w", klog.KObj(ds), err)
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) observe(ctx context.Context, ds *cdiv1.DataSource) (observed, error) {
	var obs observed
	pvc, invalid, err := r.resolve(ctx, ds)
	if err != nil || invalid != "" {
		obs.invalid = invalid
		return obs, err
	}
	obs.pvc = pvc
	if pvc == nil {
		return obs, nil
	}
	key := client.ObjectKey{Namespace: pvc.Namespace, Name: pvc.Name}
	claim := &corev1.PersistentVolumeClaim{}
	switch err := r.Client.Get(ctx, key, claim); {
	case err == nil:
		obs.claim = claim
	case !apierrors.IsNotFound(err):
		return obs, err
	}
	dv := &cdiv1.DataVolume{}
	switch err := r.Client.Get(ctx, key, dv); {
	case err == nil:
		obs.dv = dv
	case !apierrors.IsNotFound(err):
		return obs, err
	}
	return obs, nil
}

// Supported names the part of a DataSource's spec that cannot be served;
// the admission webhook rejects such DataSources with it.
func Supported(ds *cdiv1.DataSource) error {
	src := ds.Spec.Source
	n := 0
	for _, set := range []bool{src.PVC != nil, src.Snapshot != nil, src.DataSource != nil} {
		if set {
			n++
		}
	}
	switch {
	case src.Snapshot != nil:
		return fmt.Errorf("spec.source.snapshot is not supported (pvc, dataSource)")
	case n > 1:
		return fmt.Errorf("spec.source must set one of pvc and dataSource")
	}
	return nil
}

// resolve finds the PVC a DataSource names, following one dataSource
// reference as CDI does; invalid says why it cannot.
func (r *Reconciler) resolve(ctx context.Context, ds *cdiv1.DataSource) (*cdiv1.DataVolumeSourcePVC, string, error) {
	src := ds.Spec.Source
	switch {
	case src.Snapshot != nil:
		return nil, "spec.source.snapshot is not supported (pvc, dataSource)", nil
	case src.PVC != nil:
		pvc := src.PVC.DeepCopy()
		if pvc.Namespace == "" {
			pvc.Namespace = ds.Namespace
		}
		return pvc, "", nil
	case src.DataSource != nil:
		ref := src.DataSource
		ns := ref.Namespace
		if ns == "" {
			ns = ds.Namespace
		}
		target := &cdiv1.DataSource{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, target); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("DataSource %s/%s not found", ns, ref.Name), nil
			}
			return nil, "", err
		}
		if target.Spec.Source.DataSource != nil {
			return nil, fmt.Sprintf("DataSource %s/%s refers to another DataSource: references may not chain", ns, ref.Name), nil
		}
		pvc, invalid, err := r.resolve(ctx, target)
		if pvc == nil && invalid == "" && err == nil {
			invalid = fmt.Sprintf("DataSource %s/%s has no source", ns, ref.Name)
		}
		return pvc, invalid, err
	}
	return nil, "", nil
}

// indexValue is the key DataSources are found by from a PVC or DataVolume.
func indexValue(ns, name string) string { return ns + "/" + name }

// SetupWithManager watches DataSources and the PVCs and DataVolumes they name.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &cdiv1.DataSource{}, sourceIndex, func(o client.Object) []string {
		ds := o.(*cdiv1.DataSource)
		if p := ds.Spec.Source.PVC; p != nil {
			ns := p.Namespace
			if ns == "" {
				ns = ds.Namespace
			}
			return []string{indexValue(ns, p.Name)}
		}
		if p := ds.Status.Source.PVC; p != nil {
			return []string{indexValue(p.Namespace, p.Name)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing DataSources by source: %w", err)
	}
	err = mgr.GetFieldIndexer().IndexField(ctx, &cdiv1.DataSource{}, refIndex, func(o client.Object) []string {
		ds := o.(*cdiv1.DataSource)
		if ref := ds.Spec.Source.DataSource; ref != nil {
			ns := ref.Namespace
			if ns == "" {
				ns = ds.Namespace
			}
			return []string{indexValue(ns, ref.Name)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing DataSources by reference: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).Named("datasource").
		For(&cdiv1.DataSource{}).
		Watches(&corev1.PersistentVolumeClaim{}, r.enqueueBy(sourceIndex)).
		Watches(&cdiv1.DataVolume{}, r.enqueueBy(sourceIndex)).
		Watches(&cdiv1.DataSource{}, r.enqueueBy(refIndex)).
		Complete(r)
}

// enqueueBy maps an object to the DataSources whose index names it.
func (r *Reconciler) enqueueBy(index string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &cdiv1.DataSourceList{}
		if err := r.Client.List(ctx, list, client.MatchingFields{index: indexValue(o.GetNamespace(), o.GetName())}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing DataSources", "source", klog.KObj(o))
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, ds := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ds)})
		}
		return reqs
	})
}
