package hostedservices

import (
	"context"
	"fmt"
	"sort"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/nodepool"
)

// MaxLoadBalancers is how many LoadBalancer Services of one hosted cluster
// are published; the rest are refused with an event, so that one hosted
// cluster's admin cannot fill the infrastructure with Services.
const MaxLoadBalancers = 100

const (
	// resync is how often a published cluster is looked at again without
	// a change seen.
	resync = 5 * time.Minute
	// retry is how soon a cluster whose API server did not answer is.
	retry = 20 * time.Second
)

// Reasons of the events on hosted Services, as Kubernetes' service
// controller names them.
const (
	EnsuredReason = "EnsuredLoadBalancer"
	FailedReason  = "SyncLoadBalancerFailed"
)

// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch

// Reconciler publishes the LoadBalancer Services and the default ingress of
// each HostedCluster. Services and EndpointSlices of a control-plane
// namespace are read through Reader: the controller may touch them in
// control-plane namespaces only (config/hosted/control_plane_access.yaml).
type Reconciler struct {
	client.Client
	Reader  client.Reader
	watches *watches
}

// Reconcile publishes one HostedCluster's Services.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &hyperv1.HostedCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			r.watches.stop(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cluster.Spec.Platform.Type != hyperv1.KubevirtPlatform || !cluster.DeletionTimestamp.IsZero() {
		r.watches.stop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	cpNS := hc.ControlPlaneNamespace(cluster.Namespace, cluster.Name)
	kubeconfig, err := r.kubeconfig(ctx, cluster, cpNS)
	if err != nil || kubeconfig == nil {
		return ctrl.Result{RequeueAfter: retry}, err // not provisioned yet
	}
	log := ctrl.LoggerFrom(ctx)
	h, err := r.watches.ensure(ctx, req.NamespacedName, kubeconfig)
	if err != nil {
		log.Info("hosted cluster not watched yet", "reason", err.Error())
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	workers, err := r.workers(ctx, cpNS, h)
	if err != nil {
		return ctrl.Result{}, err
	}
	pending, err := r.publishLoadBalancers(ctx, cluster, cpNS, h, workers)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.publishIngress(ctx, cluster, cpNS, h, workers); err != nil {
		return ctrl.Result{}, err
	}
	if pending {
		// The infrastructure's Services are not watched: one still
		// waiting for a load-balancer address is looked at again soon, as
		// the KubeVirt cloud provider polls.
		return ctrl.Result{RequeueAfter: retry}, nil
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// kubeconfig is the hosted cluster's admin kubeconfig, or nil while the
// control plane is not provisioned (or its namespace is another cluster's).
func (r *Reconciler) kubeconfig(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string) ([]byte, error) {
	ns := &corev1.Namespace{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: cpNS}, ns); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if ns.Annotations[hc.ClusterAnnotation] != cluster.Namespace+"/"+cluster.Name {
		return nil, nil
	}
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: hc.LocalKubeconfigSecret}, s)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", cpNS, hc.LocalKubeconfigSecret, err)
	}
	return s.Data[hc.KubeconfigKey], nil
}

// workers are the cluster's worker VMIs with their hosted Nodes' readiness.
func (r *Reconciler) workers(ctx context.Context, cpNS string, h *hosted) ([]Worker, error) {
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.List(ctx, vmis, client.InNamespace(cpNS), client.HasLabels{nodepool.PoolLabel}); err != nil {
		return nil, fmt.Errorf("listing the workers in %s: %w", cpNS, err)
	}
	list, err := h.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	nodes := make(map[string]*corev1.Node, len(list))
	for _, n := range list {
		nodes[n.Name] = n
	}
	return Workers(vmis.Items, nodes), nil
}

// publishLoadBalancers gives each published hosted Service its
// infrastructure Service and EndpointSlice and the address in its status,
// and deletes the infrastructure Services of those gone. pending: one of
// them has no load-balancer address of the infrastructure's yet.
func (r *Reconciler) publishLoadBalancers(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string, h *hosted, workers []Worker) (pending bool, err error) {
	all, err := h.services.List(labels.Everything())
	if err != nil {
		return false, err
	}
	var published []*corev1.Service
	for _, svc := range all {
		if Publishes(svc) {
			published = append(published, svc)
		}
	}
	sort.Slice(published, func(i, j int) bool { return published[i].CreationTimestamp.Before(&published[j].CreationTimestamp) })
	keep := map[string]bool{}
	for i, svc := range published {
		if i >= MaxLoadBalancers {
			h.recorder.Eventf(svc, corev1.EventTypeWarning, FailedReason, "the hosted cluster has more than %d LoadBalancer Services; this one is not published", MaxLoadBalancers)
			continue
		}
		want := LoadBalancerService(cluster, cpNS, svc)
		if want == nil {
			h.recorder.Event(svc, corev1.EventTypeWarning, FailedReason, "no port has a node port to forward to (spec.allocateLoadBalancerNodePorts is false)")
			continue
		}
		keep[want.Name] = true
		infra, err := r.applyService(ctx, want)
		if err != nil {
			h.recorder.Eventf(svc, corev1.EventTypeWarning, FailedReason, "publishing in the infrastructure: %v", err)
			return false, err
		}
		if err := r.applySlice(ctx, EndpointSlice(infra, workers, localNodes(h, svc))); err != nil {
			return false, err
		}
		if err := setStatus(ctx, h, svc, LoadBalancerStatus(infra), cpNS+"/"+infra.Name); err != nil {
			return false, err
		}
		pending = pending || len(infra.Status.LoadBalancer.Ingress) == 0
	}
	existing := &corev1.ServiceList{}
	if err := r.Reader.List(ctx, existing, client.InNamespace(cpNS), client.MatchingLabels{hc.ComponentLabel: LoadBalancerComponent, ClusterNameLabel: cluster.Name}); err != nil {
		return false, fmt.Errorf("listing the Services in %s: %w", cpNS, err)
	}
	for i := range existing.Items {
		if s := &existing.Items[i]; !keep[s.Name] {
			if err := r.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				return false, fmt.Errorf("deleting Service %s/%s of a gone hosted Service %s/%s: %w", cpNS, s.Name, s.Labels[TenantServiceNamespaceLabel], s.Labels[TenantServiceNameLabel], err)
			}
			ctrl.LoggerFrom(ctx).Info("deleted the load balancer of a hosted Service gone", "service", s.Name,
				"hostedService", s.Labels[TenantServiceNamespaceLabel]+"/"+s.Labels[TenantServiceNameLabel])
		}
	}
	return pending, nil
}

// publishIngress passes the hosted router's node ports through the
// cluster's default-ingress Service.
func (r *Reconciler) publishIngress(ctx context.Context, cluster *hyperv1.HostedCluster, cpNS string, h *hosted, workers []Worker) error {
	router, err := h.services.Services(hc.RouterNamespace).Get(hc.RouterService)
	if apierrors.IsNotFound(err) {
		router, err = nil, nil
	}
	if err != nil {
		return err
	}
	infra, err := r.applyService(ctx, PassthroughService(cluster, cpNS, router))
	if err != nil {
		return err
	}
	var only map[string]bool
	if router != nil {
		only = localNodes(h, router)
	}
	return r.applySlice(ctx, EndpointSlice(infra, workers, only))
}

// setStatus writes status into hosted Service svc's, if it differs.
func setStatus(ctx context.Context, h *hosted, svc *corev1.Service, status corev1.LoadBalancerStatus, infra string) error {
	if equality.Semantic.DeepEqual(svc.Status.LoadBalancer, status) {
		return nil
	}
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer = status
	if _, err := h.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the status of hosted Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if len(status.Ingress) > 0 {
		h.recorder.Eventf(svc, corev1.EventTypeNormal, EnsuredReason, "Ensured load balancer: infrastructure Service %s", infra)
	}
	return nil
}

// localNodes are the hosted nodes with a ready endpoint of svc when it
// keeps external traffic on its endpoints' nodes; nil (all) otherwise.
func localNodes(h *hosted, svc *corev1.Service) map[string]bool {
	if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return nil
	}
	out := map[string]bool{}
	slices, _ := h.slices.EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name}))
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				out[*ep.NodeName] = true
			}
		}
	}
	return out
}

// applyService creates want, or updates the Service of its name to it,
// and returns the Service as stored.
func (r *Reconciler) applyService(ctx context.Context, want *corev1.Service) (*corev1.Service, error) {
	got := &corev1.Service{}
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(want), got)
	if apierrors.IsNotFound(err) {
		if err := r.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("creating Service %s/%s: %w", want.Namespace, want.Name, err)
		}
		return want, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", want.Namespace, want.Name, err)
	}
	if got.Labels[ClusterNameLabel] != want.Labels[ClusterNameLabel] || got.Labels[hc.ComponentLabel] != want.Labels[hc.ComponentLabel] {
		return nil, fmt.Errorf("service %s/%s exists and is not this cluster's %s", want.Namespace, want.Name, want.Labels[hc.ComponentLabel])
	}
	if equality.Semantic.DeepEqual(got.Labels, want.Labels) && got.Spec.Type == want.Spec.Type && equality.Semantic.DeepEqual(got.Spec.Ports, want.Spec.Ports) &&
		len(got.Spec.Selector) == 0 {
		return got, nil
	}
	got.Labels, got.Spec.Type, got.Spec.Ports, got.Spec.Selector = want.Labels, want.Spec.Type, want.Spec.Ports, nil
	got.Spec.AllocateLoadBalancerNodePorts = want.Spec.AllocateLoadBalancerNodePorts
	if err := r.Update(ctx, got); err != nil {
		return nil, fmt.Errorf("updating Service %s/%s: %w", want.Namespace, want.Name, err)
	}
	return got, nil
}

// applySlice creates want, or updates the EndpointSlice of its name to it.
func (r *Reconciler) applySlice(ctx context.Context, want *discoveryv1.EndpointSlice) error {
	got := &discoveryv1.EndpointSlice{}
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(want), got)
	if apierrors.IsNotFound(err) {
		if err := r.Create(ctx, want); err != nil {
			return fmt.Errorf("creating EndpointSlice %s/%s: %w", want.Namespace, want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading EndpointSlice %s/%s: %w", want.Namespace, want.Name, err)
	}
	if equality.Semantic.DeepEqual(got.Labels, want.Labels) && equality.Semantic.DeepEqual(got.OwnerReferences, want.OwnerReferences) &&
		equality.Semantic.DeepEqual(got.Ports, want.Ports) && equality.Semantic.DeepEqual(got.Endpoints, want.Endpoints) {
		return nil
	}
	got.Labels, got.OwnerReferences, got.Ports, got.Endpoints = want.Labels, want.OwnerReferences, want.Ports, want.Endpoints
	if err := r.Update(ctx, got); err != nil {
		return fmt.Errorf("updating EndpointSlice %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

// workerMoved passes the VMI changes that move a worker's endpoint: its
// phase, node, addresses or deletion.
var workerMoved = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*kubevirtv1.VirtualMachineInstance)
	n, ok2 := e.ObjectNew.(*kubevirtv1.VirtualMachineInstance)
	if !ok1 || !ok2 {
		return true
	}
	return o.Status.Phase != n.Status.Phase || o.Status.NodeName != n.Status.NodeName || podNetworkAddress(o) != podNetworkAddress(n) ||
		o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
}}

// SetupWithManager watches HostedClusters, their workers' VMIs (through
// their NodePools) and, once provisioned, their hosted clusters.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.watches = newWatches()
	if err := mgr.Add(r.watches); err != nil {
		return err
	}
	byPool := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		pool := &hyperv1.NodePool{}
		if l[nodepool.PoolLabel] == "" || r.Get(ctx, client.ObjectKey{Namespace: l[nodepool.PoolNamespaceLabel], Name: l[nodepool.PoolLabel]}, pool) != nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.ClusterName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("hostedservices").
		For(&hyperv1.HostedCluster{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, byPool, builder.WithPredicates(workerMoved)).
		WatchesRawSource(source.Channel(r.watches.events, &handler.TypedEnqueueRequestForObject[*hyperv1.HostedCluster]{})).
		Complete(r)
}
