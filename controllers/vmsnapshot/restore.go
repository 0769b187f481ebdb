package vmsnapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
)

// restoreFinalizer holds a restore until its target is unlocked.
const restoreFinalizer = "snapshot.kubevirt.io/vmrestore-protection"

// KubeVirt's words for where a restore stands.
var (
	reasonGracePeriodExceeded = fmt.Sprintf("Restore target failed to be ready within %s. Please power off the target VM before attempting restore", snapshotv1.DefaultGracePeriod)
	reasonWaitGracePeriod     = fmt.Sprintf("Waiting for target VM to be powered off. Please stop the restore target to proceed with restore, or the operation will fail after %s", snapshotv1.DefaultGracePeriod)
)

const (
	reasonWaitEventually  = "Waiting for target VM to be powered off. Please stop the restore target to proceed with restore"
	reasonTargetNotReady  = "Restore target is not ready: the VM runs"
	reasonRestoring       = "Creating new PVCs"
	reasonRestoreComplete = "Operation complete"
	reasonExistingTarget  = "restore source and restore target are different but restore target already exists"
)

// errWait is a restore waiting for something; its message is the reason.
type errWait struct{ reason string }

func (e errWait) Error() string { return e.reason }

// errFail ends a restore.
type errFail struct{ reason string }

func (e errFail) Error() string { return e.reason }

// RestoreReconciler restores VirtualMachineRestores' snapshots into their
// targets.
type RestoreReconciler struct {
	Client client.Client
	// Recorder records events on restores (nil: none).
	Recorder events.EventRecorder
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinerestores,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinerestores/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinerestores/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;create;delete

// Reconcile takes one restore a step further.
func (r *RestoreReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res := &snapshotv1.VirtualMachineRestore{}
	if err := r.Client.Get(ctx, req.NamespacedName, res); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if res.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, res)
	}
	if res.Status != nil && (ptr.Deref(res.Status.Complete, false) || condition(res.Status.Conditions, snapshotv1.ConditionFailure) != nil) {
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(res, restoreFinalizer) {
		patch := client.MergeFrom(res.DeepCopy())
		controllerutil.AddFinalizer(res, restoreFinalizer)
		if err := r.Client.Patch(ctx, res, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer of %s: %w", klog.KObj(res), err)
		}
	}
	now := metav1.NewTime(r.now())
	st := &snapshotv1.VirtualMachineRestoreStatus{Complete: ptr.To(false)}
	if res.Status != nil {
		st = res.Status.DeepCopy()
	}
	waiting, err := r.outcome(ctx, res, st, r.restore(ctx, res, st, now), now)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !equality.Semantic.DeepEqual(res.Status, st) {
		patch := client.MergeFrom(res.DeepCopy())
		res.Status = st
		if err := r.Client.Status().Patch(ctx, res, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("patching status of %s: %w", klog.KObj(res), err)
		}
	}
	if waiting {
		return reconcile.Result{RequeueAfter: retryEvery}, nil
	}
	return reconcile.Result{}, nil
}

// outcome writes into st what restoring res came to (err: nil when done,
// errWait or errFail), returning whether it waits; other errors are
// returned to be retried.
func (r *RestoreReconciler) outcome(ctx context.Context, res *snapshotv1.VirtualMachineRestore, st *snapshotv1.VirtualMachineRestoreStatus, err error, now metav1.Time) (bool, error) {
	var wait errWait
	var fail errFail
	switch {
	case err == nil:
		st.Complete, st.RestoreTime = ptr.To(true), ptr.To(now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, reasonRestoreComplete, now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionTrue, reasonRestoreComplete, now)
		r.event(res, corev1.EventTypeNormal, "VirtualMachineRestoreComplete", "Successfully completed VirtualMachineRestore %s", res.Name)
		return false, nil
	case errors.As(err, &wait):
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, wait.reason, now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, wait.reason, now)
		return true, nil
	case errors.As(err, &fail):
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionFalse, fail.reason, now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionReady, corev1.ConditionFalse, fail.reason, now)
		st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionFailure, corev1.ConditionTrue, fail.reason, now)
		r.event(res, corev1.EventTypeWarning, "VirtualMachineRestoreError", "VirtualMachineRestore failed %s", fail.reason)
		return false, r.unlockTarget(ctx, res)
	}
	return false, err
}

func (r *RestoreReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// restore restores res's snapshot into its target, recording in st what
// it made; errWait and errFail say why it cannot (yet).
func (r *RestoreReconciler) restore(ctx context.Context, res *snapshotv1.VirtualMachineRestore, st *snapshotv1.VirtualMachineRestoreStatus, now metav1.Time) error {
	if err := Validate(res); err != nil {
		return errFail{err.Error()}
	}
	content, err := r.snapshotContent(ctx, res)
	if err != nil {
		return err
	}
	target, err := r.target(ctx, res, content)
	if err != nil {
		return err
	}
	if target != nil && !Restored(res, target) {
		if err := r.lock(ctx, res, target); err != nil {
			return err
		}
		if err := r.stopped(ctx, res, target, now); err != nil {
			return err
		}
	}
	plan, err := PlanRestore(res, content, target, res.Annotations[requester.Annotation])
	if err != nil {
		return errFail{err.Error()}
	}
	st.Restores = plan.Restores
	st.Conditions = setCondition(st.Conditions, snapshotv1.ConditionProgressing, corev1.ConditionTrue, reasonRestoring, now)
	vm, err := r.writeTarget(ctx, res, plan, target, st)
	if err != nil {
		return err
	}
	if err := r.makeVolumes(ctx, res, plan, vm); err != nil {
		return err
	}
	return r.unlock(ctx, res, vm)
}

// snapshotContent is the ready content of res's snapshot.
func (r *RestoreReconciler) snapshotContent(ctx context.Context, res *snapshotv1.VirtualMachineRestore) (*snapshotv1.VirtualMachineSnapshotContent, error) {
	s := &snapshotv1.VirtualMachineSnapshot{}
	key := client.ObjectKey{Namespace: res.Namespace, Name: res.Spec.VirtualMachineSnapshotName}
	switch err := r.Client.Get(ctx, key, s); {
	case apierrors.IsNotFound(err):
		return nil, errWait{fmt.Sprintf("VMSnapshot %s does not exist", key)}
	case err != nil:
		return nil, err
	}
	switch {
	case s.Status != nil && s.Status.Phase == snapshotv1.Failed:
		return nil, errFail{fmt.Sprintf("VMSnapshot %s failed and is invalid to use", key)}
	case s.Status == nil || !ptr.Deref(s.Status.ReadyToUse, false) || s.Status.VirtualMachineSnapshotContentName == nil:
		return nil, errWait{fmt.Sprintf("VMSnapshot %s not ready", key)}
	}
	c := &snapshotv1.VirtualMachineSnapshotContent{}
	ckey := client.ObjectKey{Namespace: res.Namespace, Name: *s.Status.VirtualMachineSnapshotContentName}
	switch err := r.Client.Get(ctx, ckey, c); {
	case apierrors.IsNotFound(err):
		return nil, errWait{fmt.Sprintf("VMSnapshotContent %s does not exist", ckey)}
	case err != nil:
		return nil, err
	case ptr.Deref(c.Spec.VirtualMachineSnapshotName, "") != s.Name || c.Name != ContentName(s):
		return nil, errFail{fmt.Sprintf("VMSnapshotContent %s is not the content of VMSnapshot %s", ckey, key)}
	case !contentReady(c):
		return nil, errWait{fmt.Sprintf("VMSnapshotContent %s not ready", ckey)}
	}
	return c, nil
}

// target is res's target VM (nil: it is to be made).
func (r *RestoreReconciler) target(ctx context.Context, res *snapshotv1.VirtualMachineRestore, c *snapshotv1.VirtualMachineSnapshotContent) (*v1.VirtualMachine, error) {
	vm := &v1.VirtualMachine{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Spec.Target.Name}, vm); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	src := c.Spec.Source.VirtualMachine
	if !Restored(res, vm) && vm.Name != src.Name && vm.UID != src.UID {
		return nil, errFail{reasonExistingTarget}
	}
	return vm, nil
}

// lock marks vm as being restored by res, or says what holds it.
func (r *RestoreReconciler) lock(ctx context.Context, res *snapshotv1.VirtualMachineRestore, vm *v1.VirtualMachine) error {
	if other := ptr.Deref(vm.Status.RestoreInProgress, ""); other == res.Name {
		return nil
	} else if other != "" {
		return errWait{fmt.Sprintf("vm restore %s in progress", other)}
	}
	if s := ptr.Deref(vm.Status.SnapshotInProgress, ""); s != "" {
		return errWait{fmt.Sprintf("vm snapshot %s in progress", s)}
	}
	patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	vm.Status.RestoreInProgress = ptr.To(res.Name)
	if err := r.Client.Status().Patch(ctx, vm, patch); err != nil {
		return fmt.Errorf("locking %s for %s: %w", klog.KObj(vm), klog.KObj(res), err)
	}
	return nil
}

// stopped checks that vm runs no VMI, acting as res's
// targetReadinessPolicy says when it does.
func (r *RestoreReconciler) stopped(ctx context.Context, res *snapshotv1.VirtualMachineRestore, vm *v1.VirtualMachine, now metav1.Time) error {
	vmi := &v1.VirtualMachineInstance{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(vm), vmi); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	switch ptr.Deref(res.Spec.TargetReadinessPolicy, snapshotv1.VirtualMachineRestoreWaitGracePeriodAndFail) {
	case snapshotv1.VirtualMachineRestoreStopTarget:
		if rs, _ := vm.RunStrategy(); rs != v1.RunStrategyHalted {
			patch := client.MergeFrom(vm.DeepCopy())
			vm.Spec.Running, vm.Spec.RunStrategy = nil, ptr.To(v1.RunStrategyHalted)
			if err := r.Client.Patch(ctx, vm, patch); err != nil {
				return fmt.Errorf("stopping %s for %s: %w", klog.KObj(vm), klog.KObj(res), err)
			}
			r.event(res, corev1.EventTypeNormal, "RestoreTargetStopped", "Stopping VirtualMachine %s to restore it", vm.Name)
		}
		return errWait{reasonTargetNotReady}
	case snapshotv1.VirtualMachineRestoreFailImmediate:
		return errFail{reasonTargetNotReady}
	case snapshotv1.VirtualMachineRestoreWaitEventually:
		return errWait{reasonWaitEventually}
	default:
		if now.Sub(res.CreationTimestamp.Time) > snapshotv1.DefaultGracePeriod {
			return errFail{reasonGracePeriodExceeded}
		}
		return errWait{reasonWaitGracePeriod}
	}
}

// writeTarget creates or updates the target as plan says (once), deleting
// the DataVolumes of the target's templates that the restored VM no longer
// has, and returns it.
func (r *RestoreReconciler) writeTarget(ctx context.Context, res *snapshotv1.VirtualMachineRestore, plan Plan, target *v1.VirtualMachine, st *snapshotv1.VirtualMachineRestoreStatus) (*v1.VirtualMachine, error) {
	if target == nil {
		vm := plan.VM
		if err := r.Client.Create(ctx, vm); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) {
				return nil, errFail{fmt.Sprintf("creating VirtualMachine %s: %v", vm.Name, err)}
			}
			return nil, fmt.Errorf("creating %s for %s: %w", klog.KObj(vm), klog.KObj(res), err)
		}
		r.event(res, corev1.EventTypeNormal, "VirtualMachineCreated", "Created VirtualMachine %s from VMSnapshot %s", vm.Name, res.Spec.VirtualMachineSnapshotName)
		return vm, nil
	}
	if Restored(res, target) {
		return target, nil
	}
	if err := r.deleteReplaced(ctx, target, plan.VM, st); err != nil {
		return nil, err
	}
	vm := plan.VM
	if err := r.Client.Update(ctx, vm); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return nil, errFail{fmt.Sprintf("updating VirtualMachine %s: %v", vm.Name, err)}
		}
		return nil, fmt.Errorf("updating %s for %s: %w", klog.KObj(vm), klog.KObj(res), err)
	}
	r.event(res, corev1.EventTypeNormal, "VirtualMachineRestored", "Restored VirtualMachine %s from VMSnapshot %s", vm.Name, res.Spec.VirtualMachineSnapshotName)
	return vm, nil
}

// deleteReplaced deletes the DataVolumes of target's templates that vm
// (the target restored) no longer has, recording them in st.
func (r *RestoreReconciler) deleteReplaced(ctx context.Context, target, vm *v1.VirtualMachine, st *snapshotv1.VirtualMachineRestoreStatus) error {
	for _, t := range target.Spec.DataVolumeTemplates {
		if slices.ContainsFunc(vm.Spec.DataVolumeTemplates, func(n v1.DataVolumeTemplateSpec) bool { return n.Name == t.Name }) {
			continue
		}
		dv := &cdiv1.DataVolume{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: target.Namespace, Name: t.Name}, dv); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !metav1.IsControlledBy(dv, target) {
			continue
		}
		if err := r.Client.Delete(ctx, dv); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s of %s: %w", klog.KObj(dv), klog.KObj(target), err)
		}
		if !slices.Contains(st.DeletedDataVolumes, dv.Name) {
			st.DeletedDataVolumes = append(st.DeletedDataVolumes, dv.Name)
		}
	}
	return nil
}

// makeVolumes creates plan's claims and DataVolumes, owned by vm unless
// the restore's volumeOwnershipPolicy is None.
func (r *RestoreReconciler) makeVolumes(ctx context.Context, res *snapshotv1.VirtualMachineRestore, plan Plan, vm *v1.VirtualMachine) error {
	owned := ptr.Deref(res.Spec.VolumeOwnershipPolicy, snapshotv1.VolumeOwnershipPolicyVm) == snapshotv1.VolumeOwnershipPolicyVm
	var objs []client.Object
	for _, c := range plan.Claims {
		objs = append(objs, c)
	}
	for _, dv := range plan.DataVolumes {
		objs = append(objs, dv)
	}
	for _, o := range objs {
		if owned {
			// The VM's controller reference, as on the DataVolumes of its
			// templates: the VM controller follows the DataVolumes it
			// controls to start the VM once they are populated.
			if err := controllerutil.SetControllerReference(vm, o, r.Client.Scheme()); err != nil {
				return err
			}
		}
		err := r.Client.Create(ctx, o)
		switch {
		case err == nil:
		case apierrors.IsAlreadyExists(err):
			if err := r.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			if o.GetLabels()[RestoreLabel] != res.Name {
				return errFail{fmt.Sprintf("%s %s exists and was not made by this restore", kindOf(o), o.GetName())}
			}
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
			return errFail{fmt.Sprintf("creating %s %s: %v", kindOf(o), o.GetName(), err)}
		default:
			return fmt.Errorf("creating %s %s for %s: %w", kindOf(o), o.GetName(), klog.KObj(res), err)
		}
	}
	return nil
}

func kindOf(o client.Object) string {
	if _, ok := o.(*cdiv1.DataVolume); ok {
		return "DataVolume"
	}
	return "PersistentVolumeClaim"
}

// unlock clears vm's lock if res holds it.
func (r *RestoreReconciler) unlock(ctx context.Context, res *snapshotv1.VirtualMachineRestore, vm *v1.VirtualMachine) error {
	if ptr.Deref(vm.Status.RestoreInProgress, "") != res.Name {
		return nil
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Status.RestoreInProgress = nil
	if err := r.Client.Status().Patch(ctx, vm, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unlocking %s after %s: %w", klog.KObj(vm), klog.KObj(res), err)
	}
	return nil
}

// unlockTarget unlocks res's target, if it exists.
func (r *RestoreReconciler) unlockTarget(ctx context.Context, res *snapshotv1.VirtualMachineRestore) error {
	vm := &v1.VirtualMachine{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Spec.Target.Name}, vm); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return r.unlock(ctx, res, vm)
}

// finalize lets deleted restore res go once its target is unlocked.
func (r *RestoreReconciler) finalize(ctx context.Context, res *snapshotv1.VirtualMachineRestore) error {
	if !controllerutil.ContainsFinalizer(res, restoreFinalizer) {
		return nil
	}
	if err := r.unlockTarget(ctx, res); err != nil {
		return err
	}
	patch := client.MergeFrom(res.DeepCopy())
	controllerutil.RemoveFinalizer(res, restoreFinalizer)
	if err := r.Client.Patch(ctx, res, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of %s: %w", klog.KObj(res), err)
	}
	return nil
}

func (r *RestoreReconciler) event(o client.Object, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(o, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager watches restores and the VMs they target.
func (r *RestoreReconciler) SetupWithManager(mgr manager.Manager) error {
	byTarget := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		vm := o.(*v1.VirtualMachine)
		name := ptr.Deref(vm.Status.RestoreInProgress, "")
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: vm.Namespace, Name: name}}}
	})
	return builder.ControllerManagedBy(mgr).Named("vm-restore").
		For(&snapshotv1.VirtualMachineRestore{}).
		Watches(&v1.VirtualMachine{}, byTarget).
		Complete(r)
}
