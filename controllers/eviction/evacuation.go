package eviction

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"
)

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=get;list;watch;create

// RetryAfter is how long an evacuation waits after a migration of it
// failed before it tries another.
const RetryAfter = 20 * time.Second

// EvacuationReconciler takes the VMIs marked for evacuation (an eviction
// of their launcher Pod, with a LiveMigrate strategy) off their node by
// live migration, as KubeVirt's evacuation controller: one migration at a
// time, another after one failed, and the mark cleared once the VMI runs
// elsewhere. External evacuations are left to the workload's owner.
type EvacuationReconciler struct {
	Client client.Client
	// Recorder records events on the VMI (nil: none).
	Recorder events.EventRecorder
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *EvacuationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &v1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	node := vmi.Status.EvacuationNodeName
	if node == "" || vmi.IsFinal() || vmi.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	def, err := ClusterDefault(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !evacuates(Effective(vmi, def), true) {
		return ctrl.Result{}, nil
	}
	migrations := &v1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, migrations, client.InNamespace(vmi.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the migrations of %s: %w", klog.KObj(vmi), err)
	}
	inFlight, lastFailed := history(vmi, migrations.Items)
	if inFlight {
		return ctrl.Result{}, nil // the migration's end brings the next reconcile
	}
	if vmi.Status.NodeName != node {
		return ctrl.Result{}, r.clear(ctx, vmi)
	}
	if !vmi.IsMigratable() {
		return ctrl.Result{}, nil // LiveMigrateIfPossible's eviction goes through now
	}
	if wait := lastFailed.Add(RetryAfter).Sub(r.now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	m := &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, GenerateName: "kubevirt-evacuation-",
			Labels:      map[string]string{v1.MigrationSelectorLabel: vmi.Name},
			Annotations: map[string]string{v1.EvacuationMigrationAnnotation: node}},
		Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi.Name},
	}
	if err := r.Client.Create(ctx, m); err != nil {
		return ctrl.Result{}, fmt.Errorf("creating the evacuation migration of %s: %w", klog.KObj(vmi), err)
	}
	ctrl.LoggerFrom(ctx).Info("evacuation migration created", "vmi", klog.KObj(vmi), "node", node, "migration", m.Name)
	r.event(vmi, corev1.EventTypeNormal, "EvacuationMigration", "Migration %s takes the VMI off node %s, which evicted it", m.Name, node)
	return ctrl.Result{}, nil
}

// history says whether one of vmi's migrations is in flight, and when the
// last evacuation migration of it that failed was made.
func history(vmi *v1.VirtualMachineInstance, migrations []v1.VirtualMachineInstanceMigration) (inFlight bool, lastFailed time.Time) {
	for _, m := range migrations {
		switch {
		case m.Spec.VMIName != vmi.Name:
		case !m.IsFinal():
			inFlight = true
		case m.Status.Phase == v1.MigrationFailed && m.Annotations[v1.EvacuationMigrationAnnotation] != "" && m.CreationTimestamp.After(lastFailed):
			lastFailed = m.CreationTimestamp.Time
		}
	}
	return inFlight, lastFailed
}

// clear takes the evacuation mark off a VMI that left its node.
func (r *EvacuationReconciler) clear(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	from := vmi.Status.EvacuationNodeName
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"evacuationNodeName":null}}`))
	if err := r.Client.Status().Patch(ctx, vmi, patch); err != nil {
		return fmt.Errorf("clearing the evacuation mark of %s: %w", klog.KObj(vmi), err)
	}
	r.event(vmi, corev1.EventTypeNormal, "Evacuated", "The VMI left node %s, which evicted it, for node %s", from, vmi.Status.NodeName)
	return nil
}

func (r *EvacuationReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *EvacuationReconciler) event(vmi *v1.VirtualMachineInstance, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(vmi, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager watches VMIs and their migrations.
func (r *EvacuationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byVMI := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		m, ok := o.(*v1.VirtualMachineInstanceMigration)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("vmi-evacuation").
		For(&v1.VirtualMachineInstance{}).
		Watches(&v1.VirtualMachineInstanceMigration{}, byVMI).
		Complete(r)
}
