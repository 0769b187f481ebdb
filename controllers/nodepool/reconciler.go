package nodepool

import (
	"context"
	"fmt"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/controllers/nodepool/autoscale"
)

// Finalizer holds a NodePool until its workers are gone.
const Finalizer = "hypershift.openshift.io/finalizer"

// How often a pool is looked at again, since hosted nodes are not watched:
// while it changes, and once it is steady.
const (
	progressInterval = 10 * time.Second
	steadyInterval   = 30 * time.Second
)

// Creating and deleting workers and their disks, and reading the control
// plane's Secrets, is granted only in control-plane namespaces, by the Role
// binding the HostedCluster controller makes there
// (hc.ControllerAccessRole), not here.
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=nodepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=nodepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=nodepools/finalizers,verbs=update
// +kubebuilder:rbac:groups=hypershift.openshift.io,resources=hostedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Reconciler keeps each NodePool's workers.
type Reconciler struct {
	client.Client
	// Reader reads the control plane's Secrets and single Nodes, which are
	// not cached (the controller may not list Nodes: it places nothing).
	Reader client.Reader
	// WorkerImage is the containerDisk workers boot unless the pool names one.
	WorkerImage string
	Now         func() time.Time

	unneeded unneededTimes
}

func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now())
	}
	return metav1.Now()
}

// Reconcile makes one NodePool's workers match it and reports on them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	np := &hyperv1.NodePool{}
	if err := r.Get(ctx, req.NamespacedName, np); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if np.Spec.Platform.Type != hyperv1.KubevirtPlatform {
		return ctrl.Result{}, nil // admission refuses other platforms
	}
	cpNS := hc.ControlPlaneNamespace(np.Namespace, np.Spec.ClusterName)
	if !np.DeletionTimestamp.IsZero() {
		return r.teardown(ctx, np, cpNS)
	}
	if controllerutil.AddFinalizer(np, Finalizer) {
		if err := r.Update(ctx, np); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	vms, err := r.workers(ctx, np, cpNS)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs, env, remove, err := r.observe(ctx, np, cpNS, vms)
	if err != nil {
		return ctrl.Result{}, err
	}
	if obs.Blocked == nil {
		if err := r.converge(ctx, np, &obs, env, vms, remove); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.updateStatus(ctx, np, obs); apierrors.IsConflict(err) {
		// Written from a cached copy older than the last write; look again.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	// An autoscaled pool is looked at as often as the cluster-autoscaler
	// scans (10 s), since hosted Pods are not watched either.
	if Ready(obs) && np.Spec.AutoScaling == nil {
		return ctrl.Result{RequeueAfter: steadyInterval}, nil
	}
	return ctrl.Result{RequeueAfter: progressInterval}, nil
}

// observe finds the pool's workers, their hosted nodes and what blocks
// them, and how many the pool wants (and, autoscaled, which to remove
// first).
func (r *Reconciler) observe(ctx context.Context, np *hyperv1.NodePool, cpNS string, vms []kubevirtv1.VirtualMachine) (Observed, env, string, error) {
	vmis, err := r.instances(ctx, cpNS)
	if err != nil {
		return Observed{}, env{}, "", err
	}
	obs := Observed{Autoscaling: np.Spec.AutoScaling != nil, Machines: machines(vms, vmis)}
	e, blocked, err := r.prerequisites(ctx, np, cpNS)
	if err != nil {
		return obs, e, "", err
	}
	obs.Blocked = blocked
	if blocked == nil {
		if err := r.observeNodes(ctx, e.hosted, obs.Machines); err != nil {
			obs.Blocked = &Problem{WaitingForControlPlane, err.Error()}
		}
	}
	obs.Desired = Desired(np, len(obs.staying()))
	remove := ""
	if obs.Blocked == nil && np.Spec.AutoScaling != nil {
		if obs.Desired, remove, err = r.autoscale(ctx, np, e, obs.Machines); err != nil {
			obs.Blocked = &Problem{WaitingForControlPlane, err.Error()}
		}
	}
	return obs, e, remove, nil
}

// workers are np's VMs in the control-plane namespace.
func (r *Reconciler) workers(ctx context.Context, np *hyperv1.NodePool, cpNS string) ([]kubevirtv1.VirtualMachine, error) {
	list := &kubevirtv1.VirtualMachineList{}
	if err := r.List(ctx, list, client.InNamespace(cpNS), client.MatchingLabels(Labels(np))); err != nil {
		return nil, fmt.Errorf("listing the workers of NodePool %s/%s: %w", np.Namespace, np.Name, err)
	}
	return list.Items, nil
}

// machines are what the controller knows of vms and their VMIs (by name).
func machines(vms []kubevirtv1.VirtualMachine, vmis map[string]*kubevirtv1.VirtualMachineInstance) []Machine {
	out := make([]Machine, 0, len(vms))
	for i := range vms {
		vm := &vms[i]
		m := Machine{Name: vm.Name, Created: vm.CreationTimestamp.Time, VMReady: vm.Status.Ready,
			Removing: vm.Annotations[RemovingAnnotation] != "" || !vm.DeletionTimestamp.IsZero()}
		if vmi := vmis[vm.Name]; vmi != nil {
			// Only an External worker is the pool's to replace; any other
			// is being migrated off the node by the infrastructure.
			external := vmi.Spec.EvictionStrategy != nil && *vmi.Spec.EvictionStrategy == kubevirtv1.EvictionStrategyExternal
			m.Evacuate = external && vmi.Status.EvacuationNodeName != ""
			for _, c := range vmi.Status.Conditions {
				if c.Type == kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled) && c.Status == corev1.ConditionFalse {
					m.Unschedulable = c.Message
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// instances are the VMIs of the control-plane namespace by name.
func (r *Reconciler) instances(ctx context.Context, cpNS string) (map[string]*kubevirtv1.VirtualMachineInstance, error) {
	list := &kubevirtv1.VirtualMachineInstanceList{}
	if err := r.List(ctx, list, client.InNamespace(cpNS)); err != nil {
		return nil, fmt.Errorf("listing the VMIs of %s: %w", cpNS, err)
	}
	out := make(map[string]*kubevirtv1.VirtualMachineInstance, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// env is what workers are made with: the HostedCluster, the worker spec
// (from its provisioned control plane) and a client of the hosted cluster.
type env struct {
	cluster *hyperv1.HostedCluster
	spec    Spec
	hosted  kubernetes.Interface
}

// prerequisites are what workers are made with: the HostedCluster, its
// provisioned control plane (the bootstrap Secret and admin kubeconfig),
// and an image to boot; or the problem that blocks them.
func (r *Reconciler) prerequisites(ctx context.Context, np *hyperv1.NodePool, cpNS string) (env, *Problem, error) {
	key := client.ObjectKey{Namespace: np.Namespace, Name: np.Spec.ClusterName}
	cluster := &hyperv1.HostedCluster{}
	if err := r.Get(ctx, key, cluster); apierrors.IsNotFound(err) {
		return env{}, &Problem{HostedClusterNotFoundReason, fmt.Sprintf("HostedCluster %s (spec.clusterName) does not exist", key)}, nil
	} else if err != nil {
		return env{}, nil, err
	}
	if msg := hostDevicesProblem(kubevirtPlatform(np).KubevirtHostDevices); msg != "" {
		return env{}, &Problem{InvalidPlatformReason, msg}, nil
	}
	image := Image(np, r.WorkerImage)
	if image == "" {
		return env{}, &Problem{InvalidPlatformReason, "spec.platform.kubevirt.rootVolume.diskImage.containerDiskImage is not set and this install publishes no worker image"}, nil
	}
	secrets := map[string]*corev1.Secret{}
	for _, name := range []string{hc.WorkerBootstrapSecret, hc.LocalKubeconfigSecret} {
		s := &corev1.Secret{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: name}, s)
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return env{}, &Problem{WaitingForControlPlane, fmt.Sprintf("waiting for HostedCluster %s to be provisioned (Secret %s/%s)", key, cpNS, name)}, nil
		}
		if err != nil {
			return env{}, nil, fmt.Errorf("reading Secret %s/%s: %w", cpNS, name, err)
		}
		secrets[name] = s
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secrets[hc.LocalKubeconfigSecret].Data[hc.KubeconfigKey])
	if err != nil {
		return env{}, nil, fmt.Errorf("secret %s/%s: %w", cpNS, hc.LocalKubeconfigSecret, err)
	}
	cfg.Timeout = 10 * time.Second
	hosted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return env{}, nil, err
	}
	st, _ := rootVolume(np)
	class, err := hostpath.ClaimClass(ctx, r.Client, st.StorageClassName)
	if err != nil {
		return env{}, nil, err
	}
	spec := Spec{Namespace: cpNS, Image: image, UserData: string(secrets[hc.WorkerBootstrapSecret].Data[hc.UserDataKey]), SharedRoot: RootShared(np, class)}
	return env{cluster: cluster, spec: spec, hosted: hosted}, nil, nil
}

// autoscale applies the autoscaling rules to the pool: how many workers it
// wants, and which one to remove first, if any.
func (r *Reconciler) autoscale(ctx context.Context, np *hyperv1.NodePool, e env, ms []Machine) (int, string, error) {
	in, err := autoscaleInput(ctx, np, e.cluster, e.hosted, ms)
	if err != nil {
		return 0, "", err
	}
	key := client.ObjectKeyFromObject(np)
	in.UnneededSince, in.Now = r.unneeded.get(key), r.now().Time
	d := autoscale.Decide(in)
	r.unneeded.set(key, d.UnneededSince)
	if d.Desired != in.Current {
		ctrl.LoggerFrom(ctx).Info("autoscaling", "from", in.Current, "to", d.Desired, "remove", d.Remove, "reason", d.Reason)
	}
	return d.Desired, d.Remove, nil
}

// observeNodes fills in the hosted nodes of ms (node name = VM name).
func (r *Reconciler) observeNodes(ctx context.Context, hosted kubernetes.Interface, ms []Machine) error {
	nodes, err := hosted.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("the hosted API server does not answer: %w", err)
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	for i := range ms {
		if n := byName[ms[i].Name]; n != nil {
			ms[i].NodeReady, ms[i].NodeVersion = nodeReady(n), n.Status.NodeInfo.KubeletVersion
		}
	}
	return nil
}

func (r *Reconciler) updateStatus(ctx context.Context, np *hyperv1.NodePool, obs Observed) error {
	before := np.Status.DeepCopy()
	Apply(&np.Status, obs, np.Generation, r.now())
	if equality.Semantic.DeepEqual(before, &np.Status) {
		return nil
	}
	if err := r.Status().Update(ctx, np); err != nil {
		return fmt.Errorf("updating the status of NodePool %s/%s: %w", np.Namespace, np.Name, err)
	}
	return nil
}

// teardown deletes the pool's workers and cache (the hosted Node objects
// too, when the hosted cluster answers); the finalizer goes once none is
// left. A pool whose control plane is gone has nothing left.
func (r *Reconciler) teardown(ctx context.Context, np *hyperv1.NodePool, cpNS string) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(np, Finalizer) {
		return ctrl.Result{}, nil
	}
	vms, err := r.workers(ctx, np, cpNS)
	if err != nil {
		return ctrl.Result{}, err
	}
	dvs := &cdiv1.DataVolumeList{}
	if err := r.List(ctx, dvs, client.InNamespace(cpNS), client.MatchingLabels(Labels(np))); err != nil {
		return ctrl.Result{}, err
	}
	if len(vms) > 0 || len(dvs.Items) > 0 {
		e, _, _ := r.prerequisites(ctx, np, cpNS)
		hosted := e.hosted
		for i := range vms {
			if err := r.Delete(ctx, &vms[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting worker VirtualMachine %s/%s: %w", cpNS, vms[i].Name, err)
			}
			if hosted != nil {
				_ = hosted.CoreV1().Nodes().Delete(ctx, vms[i].Name, metav1.DeleteOptions{})
			}
		}
		// Only the cache is labelled with the pool; root volumes go with their VMs.
		for i := range dvs.Items {
			if err := r.Delete(ctx, &dvs.Items[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting DataVolume %s/%s: %w", cpNS, dvs.Items[i].Name, err)
			}
		}
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(np, Finalizer)
	if err := r.Update(ctx, np); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches NodePools, their workers, the workers' VMIs and
// caches (by label),
// and HostedClusters (for the pools naming them).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabels := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[PoolLabel] == "" || l[PoolNamespaceLabel] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[PoolNamespaceLabel], Name: l[PoolLabel]}}}
	})
	byCluster := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		pools := &hyperv1.NodePoolList{}
		if err := r.List(ctx, pools, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range pools.Items {
			if p.Spec.ClusterName == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
			}
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodepool").
		For(&hyperv1.NodePool{}).
		Watches(&kubevirtv1.VirtualMachine{}, byLabels).
		Watches(&kubevirtv1.VirtualMachineInstance{}, byLabels).
		Watches(&cdiv1.DataVolume{}, byLabels).
		Watches(&hyperv1.HostedCluster{}, byCluster).
		Complete(r)
}
