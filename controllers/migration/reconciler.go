package migration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"

	vmictrl "github.com/tekvirt/tekvirt/controllers/vmi"
)

// vmiNameField indexes migrations by their VMI.
const vmiNameField = "spec.vmiName"

// Reconciler drives VirtualMachineInstanceMigrations.
type Reconciler struct {
	Client client.Client
	// Reader reads past the cache (a target Pod just made may not be in it).
	Reader client.Reader
	// Recorder records events on the migration and its VMI (nil: none).
	Recorder events.EventRecorder
	// LauncherImage runs the target Pods.
	LauncherImage string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds,verbs=get;list;watch

// Reconcile takes one migration a step further.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := &v1.VirtualMachineInstanceMigration{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if done, err := r.settled(ctx, m); done || err != nil {
		return reconcile.Result{}, err
	}
	if m.DeletionTimestamp == nil && (!controllerutil.ContainsFinalizer(m, v1.VirtualMachineInstanceMigrationFinalizer) || m.Labels[v1.MigrationSelectorLabel] != m.Spec.VMIName) {
		// The label is what virtctl migrate-cancel finds a VMI's
		// migrations by.
		base := m.DeepCopy()
		controllerutil.AddFinalizer(m, v1.VirtualMachineInstanceMigrationFinalizer)
		metav1.SetMetaDataLabel(&m.ObjectMeta, v1.MigrationSelectorLabel, m.Spec.VMIName)
		if err := r.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer of migration %s: %w", klog.KObj(m), err)
		}
	}
	o, err := r.observe(ctx, m)
	if err != nil {
		return reconcile.Result{}, err
	}
	step := Next(m, o, r.now())
	if err := r.act(ctx, m, o, step); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.setPhase(ctx, m, o.VMI, step); err != nil {
		return reconcile.Result{}, err
	}
	if step.Phase == v1.MigrationSucceeded || step.Phase == v1.MigrationFailed {
		return reconcile.Result{}, r.dropFinalizer(ctx, m)
	}
	// Timeouts and the limits are time's and other migrations' to change.
	return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// observe reads the migration's VMI and target Pod and whether the limits
// let it start.
func (r *Reconciler) observe(ctx context.Context, m *v1.VirtualMachineInstanceMigration) (Observed, error) {
	var o Observed
	vmi := &v1.VirtualMachineInstance{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, vmi); {
	case apierrors.IsNotFound(err):
		return o, nil
	case err != nil:
		return o, fmt.Errorf("reading the VMI of migration %s: %w", klog.KObj(m), err)
	}
	o.VMI = vmi
	target, err := r.targetPod(ctx, m, vmi)
	if err != nil {
		return o, err
	}
	o.Target = target
	o.TargetCreated = m.Status.Phase != v1.MigrationPhaseUnset && m.Status.Phase != v1.MigrationPending
	if o.Options, err = ClusterOptions(ctx, r.Client); err != nil {
		return o, err
	}
	policy, err := policyFor(ctx, r.Client, vmi)
	if err != nil {
		return o, err
	}
	if policy != nil {
		o.Options, o.Policy = ApplyPolicy(o.Options, policy), policy.Name
	}
	if m.Status.Phase == v1.MigrationPhaseUnset || m.Status.Phase == v1.MigrationPending {
		if o.Busy, err = r.busy(ctx, m, vmi, o.Options); err != nil {
			return o, err
		}
	}
	return o, nil
}

// targetPod is the migration's target Pod: one the VMI controls, labelled
// with the migration (nil: none). A Pod missing from the cache is looked
// for on the API server, so that one just made is not taken for deleted.
func (r *Reconciler) targetPod(ctx context.Context, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	find := func(rd client.Reader) (*corev1.Pod, error) {
		pods := &corev1.PodList{}
		if err := rd.List(ctx, pods, client.InNamespace(m.Namespace), client.MatchingLabels{v1.MigrationJobLabel: string(m.UID)}); err != nil {
			return nil, fmt.Errorf("listing the target Pods of migration %s: %w", klog.KObj(m), err)
		}
		for i := range pods.Items {
			if metav1.IsControlledBy(&pods.Items[i], vmi) {
				return &pods.Items[i], nil
			}
		}
		return nil, nil
	}
	p, err := find(r.Client)
	if p != nil || err != nil || r.Reader == nil {
		return p, err
	}
	return find(r.Reader)
}

// busy says why the migration must wait: its VMI migrates already, or
// KubeVirt's limits (migrations in the cluster, outbound from the VMI's
// node) are reached; empty: it may go.
func (r *Reconciler) busy(ctx context.Context, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, opts *v1.VMIMConfigurationOptions) (string, error) {
	if ms := vmi.Status.MigrationState; ms != nil && ms.MigrationUID != m.UID && !ms.Completed && !ms.Failed {
		return fmt.Sprintf("VMI %s/%s is migrating (migration %s)", vmi.Namespace, vmi.Name, ms.MigrationUID), nil
	}
	all := &v1.VirtualMachineInstanceMigrationList{}
	if err := r.Client.List(ctx, all); err != nil {
		return "", fmt.Errorf("listing migrations: %w", err)
	}
	cluster, outbound := 0, 0
	for _, other := range all.Items {
		switch other.Status.Phase {
		case v1.MigrationPhaseUnset, v1.MigrationPending, v1.MigrationSucceeded, v1.MigrationFailed:
			continue
		}
		if other.UID == m.UID {
			continue
		}
		if other.Namespace == m.Namespace && other.Spec.VMIName == m.Spec.VMIName {
			return fmt.Sprintf("VMI %s/%s is migrating (migration %s)", vmi.Namespace, vmi.Name, other.Name), nil
		}
		cluster++
		if ms := other.Status.MigrationState; ms != nil && ms.SourceNode == vmi.Status.NodeName {
			outbound++
		}
	}
	switch {
	case cluster >= int(*opts.ParallelMigrationsPerCluster):
		return fmt.Sprintf("%d migrations run in the cluster, its limit (parallelMigrationsPerCluster)", cluster), nil
	case outbound >= int(*opts.ParallelOutboundMigrationsPerNode):
		return fmt.Sprintf("%d migrations leave node %s, its limit (parallelOutboundMigrationsPerNode)", outbound, vmi.Status.NodeName), nil
	}
	return "", nil
}

// act does what step says.
func (r *Reconciler) act(ctx context.Context, m *v1.VirtualMachineInstanceMigration, o Observed, step Step) error {
	switch {
	case step.CreateTarget:
		pod, err := TargetPod(o.VMI, m, r.LauncherImage)
		if err == nil {
			err = r.Client.Create(ctx, pod)
		}
		if err != nil {
			r.event(m, corev1.EventTypeWarning, "FailedCreate", "Error creating the migration's target pod: %v", err)
			return fmt.Errorf("creating the target Pod of migration %s: %w", klog.KObj(m), err)
		}
		r.event(m, corev1.EventTypeNormal, "SuccessfulCreate", "Created migration target pod %s/%s", pod.Namespace, pod.Name)
		log.FromContext(ctx).Info("migration target Pod created", "migration", klog.KObj(m), "pod", pod.Name)
	case step.HandOff:
		return r.handOff(ctx, m, o)
	case step.Abort:
		if ms := ours(m, o.VMI); ms != nil && !ms.AbortRequested {
			r.event(m, corev1.EventTypeWarning, "AbortingMigration", "Aborting the migration: %s", step.Reason)
		}
		return r.patchState(ctx, o.VMI, m, func(ms *v1.VirtualMachineInstanceMigrationState) {
			ms.AbortRequested = true
			if ms.AbortStatus == "" {
				ms.AbortStatus = v1.MigrationAbortInProgress
			}
		})
	case step.Finish:
		return r.finish(ctx, m, o.VMI)
	}
	if step.DeleteTarget {
		return r.dropTarget(ctx, m, o, step.Reason)
	}
	return nil
}

// handOff writes the migration into the VMI for the two handlers: its
// source and target, its limits, the target Pod among the active ones,
// and the label the target node's handler selects it by.
func (r *Reconciler) handOff(ctx context.Context, m *v1.VirtualMachineInstanceMigration, o Observed) error {
	vmi, target := o.VMI, o.Target
	base := vmi.DeepCopy()
	source := ""
	for i := range vmi.Status.ActivePods {
		if vmi.Status.ActivePods[i] == vmi.Status.NodeName {
			source = string(i)
		}
	}
	vmi.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{
		MigrationUID: m.UID, SourceNode: vmi.Status.NodeName, SourcePod: r.podName(ctx, vmi, source),
		TargetNode: target.Spec.NodeName, TargetPod: target.Name, Mode: v1.MigrationPreCopy,
		VMIMConfigurationOptions: o.Options,
	}
	if o.Policy != "" {
		vmi.Status.MigrationState.MigrationPolicyName = ptr.To(o.Policy)
	}
	vmi.Status.MigrationMethod = Method(vmi)
	if vmi.Status.ActivePods == nil {
		vmi.Status.ActivePods = map[types.UID]string{}
	}
	vmi.Status.ActivePods[target.UID] = target.Spec.NodeName
	if err := r.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("handing migration %s to the handlers: %w", klog.KObj(m), err)
	}
	base = vmi.DeepCopy()
	metav1.SetMetaDataLabel(&vmi.ObjectMeta, v1.MigrationTargetNodeNameLabel, target.Spec.NodeName)
	if err := r.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling %s with its migration's target node: %w", klog.KObj(vmi), err)
	}
	r.event(vmi, corev1.EventTypeNormal, "PreparingTarget", "Migration %s: preparing the target pod %s on node %s", m.Name, target.Name, target.Spec.NodeName)
	return nil
}

// podName is the name of the Pod with uid among vmi's.
func (r *Reconciler) podName(ctx context.Context, vmi *v1.VirtualMachineInstance, uid string) string {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{vmictrl.CreatedByLabel: string(vmi.UID)}); err != nil {
		return ""
	}
	for _, p := range pods.Items {
		if string(p.UID) == uid {
			return p.Name
		}
	}
	return ""
}

// patchState changes the VMI's migration state, when it is m's.
func (r *Reconciler) patchState(ctx context.Context, vmi *v1.VirtualMachineInstance, m *v1.VirtualMachineInstanceMigration, f func(*v1.VirtualMachineInstanceMigrationState)) error {
	if ours(m, vmi) == nil {
		return nil
	}
	base := vmi.DeepCopy()
	f(vmi.Status.MigrationState)
	if equality.Semantic.DeepEqual(base.Status, vmi.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("updating the migration state of %s: %w", klog.KObj(vmi), err)
	}
	return nil
}

// finish takes a succeeded migration off the VMI: the source Pod from the
// active ones (it completes by itself) and the target label.
func (r *Reconciler) finish(ctx context.Context, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance) error {
	base := vmi.DeepCopy()
	dropOtherPods(vmi)
	if !equality.Semantic.DeepEqual(base.Status, vmi.Status) {
		if err := r.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("ending migration %s on %s: %w", klog.KObj(m), klog.KObj(vmi), err)
		}
	}
	if err := r.dropLabel(ctx, vmi); err != nil {
		return err
	}
	r.event(vmi, corev1.EventTypeNormal, "Migrated", "The VirtualMachineInstance migrated to node %s.", vmi.Status.NodeName)
	return nil
}

// dropTarget deletes a failed migration's target Pod and takes it off the
// VMI, whose migration state says it failed and why (a migration that
// fails before the source started has no handler to say so).
func (r *Reconciler) dropTarget(ctx context.Context, m *v1.VirtualMachineInstanceMigration, o Observed, reason string) error {
	if p := o.Target; p != nil && p.DeletionTimestamp == nil {
		if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the target Pod of migration %s: %w", klog.KObj(m), err)
		}
	}
	ms := ours(m, o.VMI)
	if ms == nil {
		return nil
	}
	base := o.VMI.DeepCopy()
	// The VMI stays on its node; a target Pod already gone is known by
	// its node only.
	dropOtherPods(o.VMI)
	if !ms.Completed && !ms.Failed {
		now := metav1.NewTime(r.now())
		ms.Failed, ms.FailureReason, ms.EndTimestamp = true, reason, &now
	}
	if !equality.Semantic.DeepEqual(base.Status, o.VMI.Status) {
		if err := r.Client.Status().Patch(ctx, o.VMI, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("taking the target Pod of migration %s off %s: %w", klog.KObj(m), klog.KObj(o.VMI), err)
		}
	}
	return r.dropLabel(ctx, o.VMI)
}

// dropOtherPods takes off vmi's active Pods those on another node than
// the one it runs on: a migration's source once it moved, its target once
// it failed.
func dropOtherPods(vmi *v1.VirtualMachineInstance) {
	for uid, node := range vmi.Status.ActivePods {
		if node != vmi.Status.NodeName {
			delete(vmi.Status.ActivePods, uid)
		}
	}
}

func (r *Reconciler) dropLabel(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	if _, ok := vmi.Labels[v1.MigrationTargetNodeNameLabel]; !ok {
		return nil
	}
	base := vmi.DeepCopy()
	delete(vmi.Labels, v1.MigrationTargetNodeNameLabel)
	if err := r.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("removing the migration target label of %s: %w", klog.KObj(vmi), err)
	}
	return nil
}

// setPhase writes the migration's phase (with the phases it passed) and a
// copy of the VMI's migration state, and records why it waits, or failed.
func (r *Reconciler) setPhase(ctx context.Context, m *v1.VirtualMachineInstanceMigration, vmi *v1.VirtualMachineInstance, step Step) error {
	base := m.DeepCopy()
	now := metav1.NewTime(r.now())
	recordPhases(&m.Status, step.Phase, now)
	if ms := ours(m, vmi); ms != nil {
		m.Status.MigrationState = ms.DeepCopy()
	}
	if step.Phase == v1.MigrationFailed && step.Reason != "" {
		if m.Status.MigrationState == nil {
			m.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{MigrationUID: m.UID}
		}
		m.Status.MigrationState.Failed, m.Status.MigrationState.FailureReason = true, step.Reason
	}
	if step.Reason != "" && (step.Phase == v1.MigrationPending || step.Phase == v1.MigrationScheduling) {
		// Why it waits (the limits, kube-scheduler's message), at every
		// step: the event recorder folds repeats into one series.
		r.event(m, corev1.EventTypeNormal, "MigrationPending", "%s", step.Reason)
	}
	if equality.Semantic.DeepEqual(base.Status, m.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("reporting migration %s: %w", klog.KObj(m), err)
	}
	if base.Status.Phase != m.Status.Phase {
		log.FromContext(ctx).Info("migration phase", "migration", klog.KObj(m), "phase", m.Status.Phase, "reason", step.Reason)
		switch m.Status.Phase {
		case v1.MigrationFailed:
			r.event(m, corev1.EventTypeWarning, "FailedMigration", "%s", step.Reason)
			if vmi != nil {
				r.event(vmi, corev1.EventTypeWarning, "FailedMigration", "Migration %s failed: %s", m.Name, step.Reason)
			}
		case v1.MigrationSucceeded:
			r.event(m, corev1.EventTypeNormal, "SuccessfulMigration", "The VirtualMachineInstance migrated to node %s.", vmi.Status.NodeName)
		}
	}
	return nil
}

// order is the migration phases in the order a migration passes them.
var order = []v1.VirtualMachineInstanceMigrationPhase{v1.MigrationPending, v1.MigrationScheduling, v1.MigrationScheduled,
	v1.MigrationPreparingTarget, v1.MigrationTargetReady, v1.MigrationRunning}

// recordPhases moves st to phase, recording each phase it passes.
func recordPhases(st *v1.VirtualMachineInstanceMigrationStatus, phase v1.VirtualMachineInstanceMigrationPhase, now metav1.Time) {
	if st.Phase == phase {
		return
	}
	seen := map[v1.VirtualMachineInstanceMigrationPhase]bool{}
	for _, t := range st.PhaseTransitionTimestamps {
		seen[t.Phase] = true
	}
	add := func(p v1.VirtualMachineInstanceMigrationPhase) {
		if !seen[p] {
			seen[p] = true
			st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, v1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: now})
		}
	}
	if phase != v1.MigrationFailed {
		for _, p := range order {
			if p == phase {
				break
			}
			add(p)
		}
	}
	add(phase)
	st.Phase = phase
}

func (r *Reconciler) dropFinalizer(ctx context.Context, m *v1.VirtualMachineInstanceMigration) error {
	if !controllerutil.ContainsFinalizer(m, v1.VirtualMachineInstanceMigrationFinalizer) {
		return nil
	}
	base := m.DeepCopy()
	controllerutil.RemoveFinalizer(m, v1.VirtualMachineInstanceMigrationFinalizer)
	if err := r.Client.Patch(ctx, m, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of migration %s: %w", klog.KObj(m), err)
	}
	return nil
}

func (r *Reconciler) event(o client.Object, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(o, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager watches migrations, their VMIs and their target Pods.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1.VirtualMachineInstanceMigration{}, vmiNameField,
		func(o client.Object) []string { return []string{o.(*v1.VirtualMachineInstanceMigration).Spec.VMIName} }); err != nil {
		return err
	}
	byVMI := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		name := o.GetName()
		if p, ok := o.(*corev1.Pod); ok {
			if p.Labels[v1.MigrationJobLabel] == "" {
				return nil
			}
			name = p.Labels[vmictrl.VMNameLabel]
		}
		list := &v1.VirtualMachineInstanceMigrationList{}
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{vmiNameField: name}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, m := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
		return out
	})
	return builder.ControllerManagedBy(mgr).Named("vmi-migration").
		For(&v1.VirtualMachineInstanceMigration{}).
		Watches(&v1.VirtualMachineInstance{}, byVMI).
		Watches(&corev1.Pod{}, byVMI).
		Complete(r)
}
