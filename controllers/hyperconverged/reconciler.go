package hyperconverged

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tekvirt/tekvirt/catalog"
	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

const (
	finalizer  = "hco.kubevirt.io/tekvirt-catalog"
	fieldOwner = client.FieldOwner("tekvirt-operator")
)

// Reconciler deploys tekvirt's components and installs the catalog for the
// HyperConverged singleton.
type Reconciler struct {
	Client client.Client
	// Reader reads single cluster-scoped objects past the cache (the
	// Template CRD), so the operator needs no list or watch of them.
	Reader client.Reader
	// StepImage is the tekvirt-step image reference the Tasks run.
	StepImage string
	// Images are the component images by import path (StepImage among them).
	Images Images
	// Now is the clock certificates are issued and renewed by (time.Now when nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds/finalizers,verbs=update
// +kubebuilder:rbac:groups=tekton.dev,resources=tasks;pipelines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses;csidrivers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshotclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networkaddonsoperator.network.kubevirt.io,resources=networkaddonsconfigs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networkaddonsoperator.network.kubevirt.io,resources=networkaddonsconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineclusterinstancetypes;virtualmachineclusterpreferences,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,namespace=tekvirt-system,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=tekvirt-system,resources=services;secrets;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,namespace=tekvirt-node,resources=daemonsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=tekvirt-node,resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=generate-ssh-keys-task;create-vm-from-manifest-task;create-vm-from-template-task;copy-template-task;modify-vm-template-task;wait-for-vmi-status-task;execute-in-vm-task;cleanup-vm-task;import-disk-task;clone-disk-task;disk-uploader-task;modify-data-object-task;prune-data-volumes-task;hosted-cluster-pki-task;hosted-cluster-etcd-task;hosted-cluster-control-plane-task;hosted-cluster-access-task;hosted-cluster-wait-task;hosted-cluster-bootstrap-task

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
	if obs.err = r.defaultSpec(ctx, hc); obs.err != nil {
		return ctrl.Result{}, obs.err
	}
	base = hc.DeepCopy()
	var renew time.Time
	if r.Images != nil {
		if renew, obs.err = r.deploy(ctx, hc, &obs); obs.err != nil {
			return ctrl.Result{}, fmt.Errorf("reconciling %s: %w", klog.KObj(hc), obs.err)
		}
	}
	if obs.templateAPI, obs.err = r.ensureTemplateAPI(ctx); obs.err != nil {
		return ctrl.Result{}, fmt.Errorf("reconciling %s: %w", klog.KObj(hc), obs.err)
	}
	if obs.templates, obs.err = r.installTemplates(ctx, hc.TemplatesNamespace()); obs.err != nil {
		obs.err = fmt.Errorf("installing the common templates into %s: %w", hc.TemplatesNamespace(), obs.err)
		return ctrl.Result{}, fmt.Errorf("reconciling %s: %w", klog.KObj(hc), obs.err)
	}
	obs.installed, obs.err = r.install(ctx, hc.CatalogNamespace())
	if obs.err != nil {
		obs.err = fmt.Errorf("installing the catalog into %s: %w", hc.CatalogNamespace(), obs.err)
		return ctrl.Result{}, fmt.Errorf("reconciling %s: %w", klog.KObj(hc), obs.err)
	}
	log.V(1).Info("reconciled", "catalogNamespace", hc.CatalogNamespace(), "catalogObjects", obs.installed, "notReady", obs.notReady, "templateAPI", obs.templateAPI)
	if renew.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(time.Second, renew.Sub(r.now()))}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
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
		if err := r.apply(ctx, o); err != nil {
			return 0, fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return len(objs), nil
}

// apply applies o; a RoleBinding whose roleRef changed (the task roles
// were renamed to <task>-task, kubevirt-tekton-tasks' names) cannot be
// updated, so it is deleted and made again.
func (r *Reconciler) apply(ctx context.Context, o *unstructured.Unstructured) error {
	err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership)
	if err == nil || !apierrors.IsInvalid(err) || o.GetKind() != "RoleBinding" {
		return err
	}
	old := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName()}}
	if derr := r.Client.Delete(ctx, old); derr != nil && !apierrors.IsNotFound(derr) {
		return fmt.Errorf("%w; deleting it to bind the new role: %w", err, derr)
	}
	return r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), fieldOwner, client.ForceOwnership)
}

// reconcileDelete removes the catalog objects and the components, then the
// finalizer (the validating webhook refuses deleting the HyperConverged
// while virtual machines exist).
func (r *Reconciler) reconcileDelete(ctx context.Context, hc *hcov1beta1.HyperConverged) error {
	if !controllerutil.ContainsFinalizer(hc, finalizer) {
		return nil
	}
	objs, err := catalog.InstallObjects(hc.CatalogNamespace(), r.StepImage)
	if err != nil {
		return reconcile.TerminalError(err)
	}
	if r.Images != nil {
		// The components, named as render names them (no certificate is
		// needed to delete one), and the CA.
		components, err := render(r.Images, certs{}, "", ctrlconfig.NetworkAddonFiles...)
		if err != nil {
			return reconcile.TerminalError(err)
		}
		objs = append(append(objs, components...), tlsSecret(caSecretName, ctrlconfig.Namespace, keyPair{}))
		if nac, _, err := networkAddonsConfig(&hcov1beta1.HyperConverged{}); err == nil {
			objs = append(objs, nac)
		}
	}
	templates, err := commonTemplates(hc.TemplatesNamespace())
	if err != nil {
		return reconcile.TerminalError(err)
	}
	objs = append(objs, templates...)
	for _, o := range objs {
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s/%s of %s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), klog.KObj(hc), err)
		}
	}
	base := hc.DeepCopy()
	controllerutil.RemoveFinalizer(hc, finalizer)
	return r.Client.Patch(ctx, hc, client.MergeFrom(base))
}

// SetupWithManager watches the HyperConverged objects, the components the
// operator deployed (label ManagedByLabel) and, by metadata only, the catalog
// objects and the set of nodes, so a change to any of them triggers a
// reconcile: a deleted or edited component is put back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	installed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[catalog.ManagedByLabel] == catalog.ManagedBy && o.GetLabels()[catalog.PartOfLabel] == catalog.PartOf
	})
	deployed := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[ManagedByLabel] == ManagedBy })
	nodesComeAndGo := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
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
	if r.Images == nil {
		return b.Complete(r)
	}
	for _, o := range []client.Object{&appsv1.Deployment{}, &appsv1.DaemonSet{}, &corev1.Service{}, &corev1.Secret{}, &corev1.ConfigMap{}} {
		b = b.Watches(o, all, builder.WithPredicates(deployed))
	}
	for _, gvk := range []metav1.TypeMeta{
		{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService"},
		{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshotClass"},
		{APIVersion: nacv1.GroupVersion.String(), Kind: "NetworkAddonsConfig"},
		{APIVersion: "instancetype.kubevirt.io/v1beta1", Kind: "VirtualMachineClusterInstancetype"},
		{APIVersion: "instancetype.kubevirt.io/v1beta1", Kind: "VirtualMachineClusterPreference"},
	} {
		b = b.WatchesMetadata(&metav1.PartialObjectMetadata{TypeMeta: gvk}, all, builder.WithPredicates(deployed))
	}
	b = b.WatchesMetadata(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}, all, builder.WithPredicates(nodesComeAndGo))
	return b.Complete(r)
}

// CacheOptions keeps the operator's informers of namespaced components to
// the two namespaces it deploys into (its RBAC allows no more).
func CacheOptions() cache.Options {
	sys := map[string]cache.Config{ctrlconfig.Namespace: {}}
	both := map[string]cache.Config{ctrlconfig.Namespace: {}, ctrlconfig.NodeNamespace: {}}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}: {Namespaces: sys},
		&corev1.Service{}:    {Namespaces: sys},
		&corev1.ConfigMap{}:  {Namespaces: sys},
		&appsv1.DaemonSet{}:  {Namespaces: map[string]cache.Config{ctrlconfig.NodeNamespace: {}}},
		&corev1.Secret{}:     {Namespaces: both},
	}}
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
