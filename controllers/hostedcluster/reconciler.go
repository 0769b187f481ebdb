package hostedcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	psapi "k8s.io/pod-security-admission/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/tekvirt/tekvirt/catalog"
	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/config"
)

// Finalizer holds a HostedCluster until its control plane is gone.
const Finalizer = "hypershift.openshift.io/finalizer"

// healthInterval is how often an available cluster's API server is looked at.
const healthInterval = 30 * time.Second

// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=nodepools,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create;delete
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;create
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=hosted-cluster-pki-task;hosted-cluster-etcd-task;hosted-cluster-control-plane-task;hosted-cluster-access-task;hosted-cluster-wait-task;hosted-cluster-bootstrap-task;tekvirt-hosted-control-plane-access
// +kubebuilder:rbac:groups=tekton.dev,resources=pipelineruns,verbs=get;list;watch;create;delete

// Reconciler provisions HostedClusters with the provision-hosted-cluster pipeline.
type Reconciler struct {
	client.Client
	// Reader reads what the manager does not cache (namespaces,
	// Deployments, Services, Secrets of control planes).
	Reader    client.Reader
	StepImage string
	// CoreDNSImage is the hosted clusters' DNS's image, RouterImage their
	// default router's, KonnectivityAgentImage their workers' Konnectivity
	// agent's.
	CoreDNSImage, RouterImage, KonnectivityAgentImage string
	Now                                               func() time.Time
}

func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now())
	}
	return metav1.Now()
}

// Reconcile provisions one HostedCluster and reports its state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster, err := r.cluster(ctx, req.NamespacedName)
	if cluster == nil { // gone, or unreadable (err)
		return ctrl.Result{}, err
	}
	if cluster.Spec.Platform.Type != hyperv1.KubevirtPlatform {
		return ctrl.Result{}, nil // admission refuses other platforms; one stored before is left alone
	}
	cpNS := hc.ControlPlaneNamespace(cluster.Namespace, cluster.Name)
	if !cluster.DeletionTimestamp.IsZero() {
		return r.teardown(ctx, cluster, cpNS)
	}
	if controllerutil.AddFinalizer(cluster, Finalizer) {
		if err := r.Update(ctx, cluster); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	obs := Observed{}
	if obs.Conflict, err = r.ensureNamespace(ctx, cluster, cpNS); err != nil {
		return ctrl.Result{}, err
	}
	if obs.Conflict == "" {
		if err := r.provision(ctx, cluster, cpNS, &obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.updateStatus(ctx, cluster, cpNS, obs); err != nil {
		return ctrl.Result{}, err
	}
	// Namespaces are not watched: a conflict (a namespace still being
	// deleted, one of another cluster) and an available cluster's health
	// are looked at again after a while.
	if obs.Conflict != "" || (obs.Run != nil && obs.Run.Succeeded) {
		return ctrl.Result{RequeueAfter: healthInterval}, nil
	}
	return ctrl.Result{}, nil
}

// provision makes what the control plane needs in its namespace cpNS
// (RBAC, the workers' NetworkPolicy, the PipelineRun) and observes the run
// and the API server into obs.
func (r *Reconciler) provision(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string, obs *Observed) error {
	if err := r.ensureRBAC(ctx, cluster, cpNS); err != nil {
		return err
	}
	if err := r.ensureNetworkPolicy(ctx, cluster, cpNS); err != nil {
		return err
	}
	var err error
	if obs.Run, err = r.ensureRun(ctx, cluster); err != nil {
		return err
	}
	obs.APIServerReady, err = r.apiServerReady(ctx, cpNS)
	return err
}

// ensureNamespace makes the control-plane namespace, or says why the one
// there is not this cluster's.
func (r *Reconciler) ensureNamespace(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string) (string, error) {
	owner := cluster.Namespace + "/" + cluster.Name
	ns := &corev1.Namespace{}
	err := r.Reader.Get(ctx, client.ObjectKey{Name: cpNS}, ns)
	switch {
	case apierrors.IsNotFound(err):
		level, err := hc.PodSecurityLevel(cluster.Annotations)
		if err != nil {
			return err.Error(), nil // admission refuses it; an older object may hold it
		}
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cpNS,
			Labels: map[string]string{hc.ControlPlaneLabel: "true", catalog.ManagedByLabel: catalog.ManagedBy,
				psapi.EnforceLevelLabel: string(level)},
			Annotations: map[string]string{hc.ClusterAnnotation: owner}}}
		if err := r.Create(ctx, ns); err != nil {
			return "", fmt.Errorf("creating namespace %s: %w", cpNS, err)
		}
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading namespace %s: %w", cpNS, err)
	}
	if got := ns.Annotations[hc.ClusterAnnotation]; got != owner {
		if got == "" {
			return fmt.Sprintf("namespace %s exists and is not a control-plane namespace; the control plane of %s needs it", cpNS, owner), nil
		}
		return fmt.Sprintf("namespace %s holds the control plane of HostedCluster %s", cpNS, got), nil
	}
	if !ns.DeletionTimestamp.IsZero() {
		return fmt.Sprintf("namespace %s is being deleted (a HostedCluster of the same name was deleted); waiting", cpNS), nil
	}
	return "", nil
}

// ensureRBAC makes the pipeline's ServiceAccount in the control-plane
// namespace, binds each task's ClusterRole there, and the access task's in
// the HostedCluster's namespace (where it writes the access Secrets); and
// lets tekvirt's controller read the control plane's admin kubeconfig and
// worker bootstrap Secret, for the NodePool controller.
func (r *Reconciler) ensureRBAC(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string) error {
	p, err := pipeline()
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: p.ServiceAccount()}}
	if err := r.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", cpNS, sa.Name, err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: cpNS}
	for _, t := range p.Tasks {
		bindings := []client.ObjectKey{{Namespace: cpNS, Name: sa.Name + "-" + t.Name}}
		if t.Name == "hosted-cluster-access" {
			bindings = append(bindings, client.ObjectKey{Namespace: cluster.Namespace, Name: cpNS + "-" + t.Name})
		}
		for _, key := range bindings {
			rb := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
					Labels:      map[string]string{catalog.ManagedByLabel: catalog.ManagedBy},
					Annotations: map[string]string{hc.ClusterAnnotation: cluster.Namespace + "/" + cluster.Name}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: t.ClusterRole.GetName()},
				Subjects: []rbacv1.Subject{subject},
			}
			if key.Namespace == cluster.Namespace {
				rb.OwnerReferences = []metav1.OwnerReference{OwnerOf(cluster)}
			}
			if err := r.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating RoleBinding %s: %w", key, err)
			}
		}
	}
	reader := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: config.ControllerServiceAccount,
			Labels: map[string]string{catalog.ManagedByLabel: catalog.ManagedBy}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: hc.ControllerAccessRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: config.ControllerServiceAccount, Namespace: config.Namespace}},
	}
	if err := r.Create(ctx, reader); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating RoleBinding %s/%s: %w", cpNS, reader.Name, err)
	}
	return nil
}

// OwnerOf is the reference that makes an object in the cluster's namespace
// go with it.
func OwnerOf(cluster *hyperv1.HostedCluster) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: hyperv1.GroupVersion.String(), Kind: "HostedCluster", Name: cluster.Name, UID: cluster.UID}
}

// ensureRun creates the PipelineRun for the cluster's spec unless it exists.
func (r *Reconciler) ensureRun(ctx context.Context, cluster *hyperv1.HostedCluster) (*Run, error) {
	registry, registryHost, err := r.localRegistry(ctx)
	if err != nil {
		return nil, err
	}
	want, err := PipelineRun(cluster, Env{StepImage: r.StepImage, LocalRegistry: registry, LocalRegistryHost: registryHost, CoreDNSImage: r.CoreDNSImage, RouterImage: r.RouterImage,
		KonnectivityAgentImage: r.KonnectivityAgentImage})
	if err != nil {
		return nil, err
	}
	pr := &pipelinev1.PipelineRun{}
	err = r.Get(ctx, client.ObjectKeyFromObject(want), pr)
	if apierrors.IsNotFound(err) {
		if err := r.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("creating PipelineRun %s/%s: %w", want.Namespace, want.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("provisioning", "pipelineRun", want.Name, "namespace", want.Namespace)
		return RunOf(want), nil
	}
	if err != nil {
		return nil, err
	}
	return RunOf(pr), nil
}

func (r *Reconciler) apiServerReady(ctx context.Context, cpNS string) (bool, error) {
	d := &appsv1.Deployment{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: hc.APIServerDeployment}, d)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil && d.Status.ReadyReplicas > 0, err
}

func (r *Reconciler) updateStatus(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string, obs Observed) error {
	before := cluster.Status.DeepCopy()
	Apply(&cluster.Status, obs, cluster.Generation, cluster.Spec.Release.Image, r.now())
	if obs.Run != nil && obs.Run.Succeeded {
		cluster.Status.KubeConfig = &corev1.LocalObjectReference{Name: hc.AdminKubeconfigSecret(cluster.Name)}
		cluster.Status.KubeadminPassword = &corev1.LocalObjectReference{Name: hc.KubeadminPasswordSecretOf(cluster.Name)}
		if ep, err := r.endpoint(ctx, cpNS); err == nil {
			cluster.Status.ControlPlaneEndpoint = ep
		}
	}
	if equality.Semantic.DeepEqual(before, &cluster.Status) {
		return nil
	}
	if err := r.Status().Update(ctx, cluster); err != nil {
		return fmt.Errorf("updating the status: %w", err)
	}
	return nil
}

// endpoint is the API server's published address, as the admin kubeconfig
// names it.
func (r *Reconciler) endpoint(ctx context.Context, cpNS string) (hyperv1.APIEndpoint, error) {
	svc := &corev1.Service{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: hc.APIServerService}, svc); err != nil {
		return hyperv1.APIEndpoint{}, err
	}
	host := hc.PublishedAddress(svc)
	if host == "" {
		return hyperv1.APIEndpoint{}, errors.New("no address yet")
	}
	return hyperv1.APIEndpoint{Host: host, Port: hc.APIServerPort}, nil
}

// teardown deletes the cluster's control-plane namespace (when it is this
// cluster's) with everything in it; the finalizer goes once it is gone. The
// access Secrets and the access task's RoleBinding in the cluster's own
// namespace are owned by the HostedCluster and go with it.
func (r *Reconciler) teardown(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cluster, Finalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.deleteNodePools(ctx, cluster); err != nil {
		return ctrl.Result{}, err
	}
	owner := cluster.Namespace + "/" + cluster.Name
	ns := &corev1.Namespace{}
	err := r.Reader.Get(ctx, client.ObjectKey{Name: cpNS}, ns)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if err == nil && ns.Annotations[hc.ClusterAnnotation] == owner {
		if ns.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting namespace %s: %w", cpNS, err)
			}
			ctrl.LoggerFrom(ctx).Info("deleting the control plane", "namespace", cpNS)
		}
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(cluster, Finalizer)
	if err := r.Update(ctx, cluster); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// cluster reads the HostedCluster; when it is gone, nil, after collecting
// what it may have left. It is nil whenever the error is not.
func (r *Reconciler) cluster(ctx context.Context, key client.ObjectKey) (*hyperv1.HostedCluster, error) {
	cluster := &hyperv1.HostedCluster{}
	err := r.Get(ctx, key, cluster)
	if apierrors.IsNotFound(err) {
		return nil, r.deleteOrphan(ctx, key)
	}
	if err != nil {
		return nil, err
	}
	return cluster, nil
}

// deleteOrphan deletes the control-plane namespace of a HostedCluster that
// is gone, should one be left: a reconcile that began before the cluster's
// deletion may have made it after the teardown looked.
func (r *Reconciler) deleteOrphan(ctx context.Context, key client.ObjectKey) error {
	if err := r.Reader.Get(ctx, key, &hyperv1.HostedCluster{}); !apierrors.IsNotFound(err) {
		return err // there after all (the cache lags), or unknown: nothing to collect
	}
	cpNS := hc.ControlPlaneNamespace(key.Namespace, key.Name)
	ns := &corev1.Namespace{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: cpNS}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ns.Annotations[hc.ClusterAnnotation] != key.String() || !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting namespace %s of the deleted HostedCluster %s: %w", cpNS, key, err)
	}
	ctrl.LoggerFrom(ctx).Info("deleting the control plane of a HostedCluster that is gone", "namespace", cpNS)
	return nil
}

// deleteNodePools deletes the cluster's NodePools, as HyperShift does; their
// workers are in the control-plane namespace and go with it anyway.
func (r *Reconciler) deleteNodePools(ctx context.Context, cluster *hyperv1.HostedCluster) error {
	pools := &hyperv1.NodePoolList{}
	if err := r.List(ctx, pools, client.InNamespace(cluster.Namespace)); err != nil {
		return fmt.Errorf("listing NodePools: %w", err)
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		if p.Spec.ClusterName != cluster.Name || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodePool %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// SetupWithManager watches HostedClusters and their PipelineRuns.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabels := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[ClusterNameLabel] == "" || l[ClusterNamespaceLabel] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[ClusterNamespaceLabel], Name: l[ClusterNameLabel]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("hostedcluster").
		For(&hyperv1.HostedCluster{}).
		Watches(&pipelinev1.PipelineRun{}, byLabels).
		Complete(r)
}
