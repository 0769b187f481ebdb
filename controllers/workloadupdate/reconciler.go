package workloadupdate

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/migration"
	vmictrl "github.com/tekvirt/tekvirt/controllers/vmi"
)

// MigrationPrefix begins the names of the updater's migrations, as
// KubeVirt's.
const MigrationPrefix = "kubevirt-workload-update-"

// the one request the updater works on: it looks at every VMI at once.
var everything = reconcile.Request{NamespacedName: types.NamespacedName{Name: "workload-update"}}

// Reconciler moves outdated VMIs onto the current launcher.
type Reconciler struct {
	Client client.Client
	// Reader lists migrations past the cache: one the updater just made
	// may not be in it yet, and the VMI would get a second.
	Reader client.Reader
	// Recorder records events on the VMIs it moves (nil: none).
	Recorder events.EventRecorder
	// LauncherImage is the current launcher.
	LauncherImage string
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu           sync.Mutex
	lastEviction time.Time
}

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds,verbs=get;list;watch

// +kubebuilder:rbac:groups=apps,namespace=tekvirt-node,resources=daemonsets,verbs=get

// rolloutPoll is how often the updater looks whether the release is
// rolled out while it waits for that.
const rolloutPoll = 5 * time.Second

// Reconcile labels the outdated VMIs and migrates or evicts them as the
// strategy says, once the release is rolled out on every node.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if ok, why, err := r.rolledOut(ctx); !ok || err != nil {
		if err == nil {
			log.FromContext(ctx).V(1).Info("workload update waits", "reason", why)
		}
		return reconcile.Result{RequeueAfter: rolloutPoll}, err
	}
	s, err := r.strategy(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	opts, err := migration.ClusterOptions(ctx, r.Client)
	if err != nil {
		return reconcile.Result{}, err
	}
	candidates, running, err := r.observe(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := r.now()
	r.mu.Lock()
	last := r.lastEviction
	r.mu.Unlock()
	plan := Decide(candidates, s, running, int(*opts.ParallelMigrationsPerCluster), last, now)
	for _, c := range plan.Migrate {
		if err := r.migrate(ctx, c); err != nil {
			return reconcile.Result{}, err
		}
	}
	if len(plan.Evict) > 0 {
		r.mu.Lock()
		r.lastEviction = now
		r.mu.Unlock()
	}
	for _, c := range plan.Evict {
		r.evict(ctx, c)
	}
	if plan.Outdated == 0 {
		return reconcile.Result{}, nil
	}
	// Migrations end and batches come due without an event to wake on.
	return reconcile.Result{RequeueAfter: min(30*time.Second, max(time.Second, s.Interval))}, nil
}

// rolledOut reads the handlers' DaemonSet past the cache (the controller
// watches no DaemonSet) and says whether it is rolled out.
func (r *Reconciler) rolledOut(ctx context.Context) (bool, string, error) {
	ds := &appsv1.DaemonSet{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: config.NodeNamespace, Name: config.HandlerDaemonSet}, ds)
	switch {
	case apierrors.IsNotFound(err):
		ds = nil
	case err != nil:
		return false, "", fmt.Errorf("reading the node handlers' DaemonSet: %w", err)
	}
	ok, why := RolledOut(ds)
	return ok, why, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// strategy is the HyperConverged's workloadUpdateStrategy, HCO's defaults
// where it says nothing.
func (r *Reconciler) strategy(ctx context.Context) (Strategy, error) {
	s := Strategy{Methods: []v1.WorkloadUpdateMethod{v1.WorkloadUpdateMethodLiveMigrate}, BatchSize: 10, Interval: time.Minute}
	var list hcov1beta1.HyperConvergedList
	if err := r.Client.List(ctx, &list); err != nil {
		return s, fmt.Errorf("reading the HyperConverged's workloadUpdateStrategy: %w", err)
	}
	if len(list.Items) == 0 {
		return s, nil
	}
	w := list.Items[0].Spec.WorkloadUpdateStrategy
	if w.WorkloadUpdateMethods != nil {
		s.Methods = nil
		for _, m := range w.WorkloadUpdateMethods {
			s.Methods = append(s.Methods, v1.WorkloadUpdateMethod(m))
		}
	}
	if w.BatchEvictionSize != nil {
		s.BatchSize = *w.BatchEvictionSize
	}
	if w.BatchEvictionInterval != nil {
		s.Interval = w.BatchEvictionInterval.Duration
	}
	return s, nil
}

// observe reads the running VMIs as candidates, labelling each outdated
// one as KubeVirt does (and unlabelling it once current), and counts the
// migrations that run.
func (r *Reconciler) observe(ctx context.Context) ([]Candidate, int, error) {
	var vmis v1.VirtualMachineInstanceList
	if err := r.Client.List(ctx, &vmis); err != nil {
		return nil, 0, fmt.Errorf("listing VMIs: %w", err)
	}
	var migrations v1.VirtualMachineInstanceMigrationList
	if err := r.Reader.List(ctx, &migrations); err != nil {
		return nil, 0, fmt.Errorf("listing migrations: %w", err)
	}
	running, migrating := 0, map[types.NamespacedName]bool{}
	for _, m := range migrations.Items {
		if m.Status.Phase != v1.MigrationSucceeded && m.Status.Phase != v1.MigrationFailed {
			running++
			migrating[types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.VMIName}] = true
		}
	}
	var out []Candidate
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		if vmi.Status.Phase != v1.Running || vmi.DeletionTimestamp != nil {
			continue
		}
		pod, err := r.activePod(ctx, vmi)
		if err != nil || pod == nil {
			continue //nolint:nilerr // a VMI without a running launcher Pod is not moved
		}
		c := Candidate{Namespace: vmi.Namespace, Name: vmi.Name, Pod: pod.Name, Outdated: launcherImage(pod) != r.LauncherImage,
			Migratable: vmi.IsMigratable(), Migrating: migrating[client.ObjectKeyFromObject(vmi)] || migratingNow(vmi)}
		if err := r.label(ctx, vmi, c.Outdated); err != nil {
			return nil, 0, err
		}
		out = append(out, c)
	}
	return out, running, nil
}

// migratingNow: the VMI's own migration state says one has not ended.
func migratingNow(vmi *v1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && !ms.Completed && !ms.Failed
}

// activePod is the VMI's running launcher Pod on its node (nil: none).
func (r *Reconciler) activePod(ctx context.Context, vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{vmictrl.CreatedByLabel: string(vmi.UID)}); err != nil {
		return nil, fmt.Errorf("listing the launcher Pods of %s: %w", klog.KObj(vmi), err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if vmi.Status.ActivePods[p.UID] == vmi.Status.NodeName && p.Spec.NodeName == vmi.Status.NodeName &&
			p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, nil
}

// launcherImage is the image of a launcher Pod's compute container.
func launcherImage(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == launcherpod.ComputeContainer {
			return c.Image
		}
	}
	return ""
}

// label sets or removes KubeVirt's outdated-launcher label on vmi.
func (r *Reconciler) label(ctx context.Context, vmi *v1.VirtualMachineInstance, outdated bool) error {
	if _, has := vmi.Labels[v1.OutdatedLauncherImageLabel]; has == outdated {
		return nil
	}
	base := vmi.DeepCopy()
	if outdated {
		metav1.SetMetaDataLabel(&vmi.ObjectMeta, v1.OutdatedLauncherImageLabel, "")
	} else {
		delete(vmi.Labels, v1.OutdatedLauncherImageLabel)
	}
	if err := r.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("labelling %s with its launcher's state: %w", klog.KObj(vmi), err)
	}
	return nil
}

// migrate starts a migration of c to a launcher Pod of the current image.
func (r *Reconciler) migrate(ctx context.Context, c Candidate) error {
	m := &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: MigrationPrefix,
			Annotations: map[string]string{v1.WorkloadUpdateMigrationAnnotation: ""}},
		Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: c.Name},
	}
	if err := r.Client.Create(ctx, m); err != nil {
		return fmt.Errorf("migrating %s/%s to the current launcher: %w", c.Namespace, c.Name, err)
	}
	log.FromContext(ctx).Info("migrating an outdated VMI to the current launcher", "vmi", c.Namespace+"/"+c.Name, "migration", m.Name)
	r.event(c, corev1.EventTypeNormal, "WorkloadUpdateMigration", "Migrating to the current launcher image (migration %s)", m.Name)
	return nil
}

// evict evicts c's launcher Pod through the eviction API, which its
// evictionStrategy answers; a refusal waits for the next batch.
func (r *Reconciler) evict(ctx context.Context, c Candidate) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Pod}}
	err := r.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Pod}})
	if err != nil {
		log.FromContext(ctx).Info("evicting an outdated VMI's launcher Pod was refused", "vmi", c.Namespace+"/"+c.Name, "pod", c.Pod, "err", err.Error())
		return
	}
	log.FromContext(ctx).Info("evicted an outdated VMI's launcher Pod", "vmi", c.Namespace+"/"+c.Name, "pod", c.Pod)
	r.event(c, corev1.EventTypeNormal, "WorkloadUpdateEviction", "Evicted launcher Pod %s to move to the current launcher image", c.Pod)
}

func (r *Reconciler) event(c Candidate, kind, reason, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	ref := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
	ref.SetGroupVersionKind(v1.VirtualMachineInstanceGroupVersionKind)
	r.Recorder.Eventf(ref, nil, kind, reason, reason, format, args...)
}

// SetupWithManager runs the updater on every change of a VMI, a migration
// or the HyperConverged.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{everything} })
	return builder.ControllerManagedBy(mgr).Named("workload-update").
		Watches(&v1.VirtualMachineInstance{}, all).
		Watches(&v1.VirtualMachineInstanceMigration{}, all).
		Watches(&hcov1beta1.HyperConverged{}, all).
		Complete(r)
}
