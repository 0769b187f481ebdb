package hyperconverged

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tekvirt/tekvirt/catalog"
	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

const (
	finalizer  = "hco.kubevirt.io/tekvirt-catalog"
	fieldOwner = client.FieldOwner("tekvirt-controller")
)

// Reconciler installs the catalog for the HyperConverged singleton.
type Reconciler struct {
	Client client.Client
	// StepImage is the tekvirt-step image reference the Tasks run.
	StepImage string
}

// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds/finalizers,verbs=update
// +kubebuilder:rbac:groups=tekton.dev,resources=tasks;pipelines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=tekvirt-generate-ssh-keys-task;tekvirt-create-vm-from-manifest-task;tekvirt-wait-for-vmi-status-task;tekvirt-execute-in-vm-task;tekvirt-cleanup-vm-task;tekvirt-import-disk-task;tekvirt-clone-disk-task;tekvirt-modify-data-object-task;tekvirt-prune-data-volumes-task

// Reconcile installs or removes the catalog and reports it in status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	log := ctrl.LoggerFrom(ctx)
	hc := &hcov1beta1.HyperConverged{}
	if err := r.Client.Get(ctx, req.NamespacedName, hc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !hc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, hc)
	}
	base := hc.DeepCopy()
	var obs observed
	defer func() {
		setConditions(hc, obs)
		if err := r.Client.Status().Patch(ctx, hc, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
			reterr = errors.Join(reterr, fmt.Errorf("patching status of %s: %w", klog.KObj(hc), err))
		}
	}()
	if hc.Name != SingletonName {
		obs.notSingleton = true
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(hc, finalizer) {
		if err := r.Client.Patch(ctx, hc, client.MergeFrom(base)); err != nil {
			obs.err = err
			return ctrl.Result{}, fmt.Errorf("adding finalizer to %s: %w", klog.KObj(hc), err)
		}
		base = hc.DeepCopy()
	}
	obs.installed, obs.err = r.install(ctx, hc.CatalogNamespace())
	if obs.err != nil {
		return ctrl.Result{}, fmt.Errorf("reconciling %s: %w", klog.KObj(hc), obs.err)
	}
	log.V(1).Info("catalog installed", "namespace", hc.CatalogNamespace(), "objects", obs.installed)
	return ctrl.Result{}, nil
}

// install applies every catalog object into ns with server-side apply, which
// recreates deleted objects and takes edited fields back.
func (r *Reconciler) install(ctx context.Context, ns string) (int, error) {
	objs, err := catalog.InstallObjects(ns, r.StepImage)
	if err != nil {
		return 0, reconcile.TerminalError(err)
	}
	// The catalog namespace, and those pipelines bind their ServiceAccounts
	// in. Create, not Get: reading namespaces through the cache would need
	// cluster-wide list and watch of every namespace.
	namespaces := map[string]bool{ns: true}
	for _, o := range objs {
		namespaces[o.GetNamespace()] = true
	}
	for name := range namespaces {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{catalog.ManagedByLabel: catalog.ManagedBy}}}
		if err := r.Client.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	for _, o := range objs {
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership); err != nil {
			return 0, fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return len(objs), nil
}

// reconcileDelete removes the catalog objects, then the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, hc *hcov1beta1.HyperConverged) error {
	if !controllerutil.ContainsFinalizer(hc, finalizer) {
		return nil
	}
	objs, err := catalog.InstallObjects(hc.CatalogNamespace(), r.StepImage)
	if err != nil {
		return reconcile.TerminalError(err)
	}
	for _, o := range objs {
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s of %s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), klog.KObj(hc), err)
		}
	}
	base := hc.DeepCopy()
	controllerutil.RemoveFinalizer(hc, finalizer)
	return r.Client.Patch(ctx, hc, client.MergeFrom(base))
}

// SetupWithManager watches the HyperConverged objects and, by metadata only,
// the catalog objects, so a change to any of them triggers a reconcile.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	installed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[catalog.ManagedByLabel] == catalog.ManagedBy && o.GetLabels()[catalog.PartOfLabel] == catalog.PartOf
	})
	all := handler.EnqueueRequestsFromMapFunc(r.requestsForAll)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("hyperconverged").
		For(&hcov1beta1.HyperConverged{})
	for _, gvk := range []metav1.TypeMeta{
		{APIVersion: "tekton.dev/v1", Kind: "Task"},
		{APIVersion: "tekton.dev/v1", Kind: "Pipeline"},
		{APIVersion: "v1", Kind: "ServiceAccount"},
		{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
	} {
		b = b.WatchesMetadata(&metav1.PartialObjectMetadata{TypeMeta: gvk}, all, builder.WithPredicates(installed))
	}
	return b.Complete(r)
}

func (r *Reconciler) requestsForAll(ctx context.Context, _ client.Object) []reconcile.Request {
	var list hcov1beta1.HyperConvergedList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing HyperConverged objects")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, hc := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&hc)})
	}
	return out
}
