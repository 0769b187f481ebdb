package vmsnapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
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

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

const (
	// snapshotFinalizer holds a snapshot until its VM is unlocked and its
	// content deleted (as its deletion policy says).
	snapshotFinalizer = "snapshot.kubevirt.io/vmsnapshot-protection"
	// retryEvery is how soon a snapshot or restore waiting on something
	// not watched (a lock, a claim) looks again.
	retryEvery = 5 * time.Second
)

// Guest freezes and thaws the file systems of a running VMI through its
// guest agent (the node handler's freeze and unfreeze operations).
type Guest interface {
	// Freeze freezes vmi's file systems; they thaw by themselves after
	// unfreezeAfter unless Unfreeze comes first.
	Freeze(ctx context.Context, vmi *v1.VirtualMachineInstance, unfreezeAfter time.Duration) error
	Unfreeze(ctx context.Context, vmi *v1.VirtualMachineInstance) error
}

// SnapshotReconciler takes VirtualMachineSnapshots and keeps their
// contents' status.
type SnapshotReconciler struct {
	Client client.Client
	// Recorder records events on snapshots (nil: none).
	Recorder events.EventRecorder
	Guest    Guest
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinesnapshots,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinesnapshots/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinesnapshots/finalizers,verbs=update
// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinesnapshotcontents,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=snapshot.kubevirt.io,resources=virtualmachinesnapshotcontents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshots,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=snapshot.storage.k8s.io,resources=volumesnapshotclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch

// Reconcile takes one snapshot a step further.
func (r *SnapshotReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &snapshotv1.VirtualMachineSnapshot{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	now := metav1.NewTime(r.now())
	if s.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, s)
	}
	if !controllerutil.ContainsFinalizer(s, snapshotFinalizer) {
		patch := client.MergeFrom(s.DeepCopy())
		controllerutil.AddFinalizer(s, snapshotFinalizer)
		if err := r.Client.Patch(ctx, s, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer of %s: %w", klog.KObj(s), err)
		}
	}
	obs, err := r.take(ctx, s, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	st := SnapshotStatus(s, obs, now)
	if Done(st) && obs.VM != nil {
		if canFreeze(obs.VMI) && st.Phase == snapshotv1.Failed {
			// A failure may come while the guest is frozen.
			r.thaw(ctx, s, obs.VMI)
		}
		if err := r.unlock(ctx, s, obs.VM); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, s, st); err != nil {
		return reconcile.Result{}, err
	}
	if Done(st) {
		return reconcile.Result{}, nil
	}
	wait := retryEvery
	if d := deadline(s); d > 0 {
		wait = min(wait, time.Until(s.CreationTimestamp.Add(d))+time.Second)
	}
	return reconcile.Result{RequeueAfter: max(wait, time.Second)}, nil
}

func (r *SnapshotReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// writeStatus stores st as s's status, with an event when it ends.
func (r *SnapshotReconciler) writeStatus(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, st *snapshotv1.VirtualMachineSnapshotStatus) error {
	if equality.Semantic.DeepEqual(s.Status, st) {
		return nil
	}
	was := s.Status.DeepCopy()
	patch := client.MergeFrom(s.DeepCopy())
	s.Status = st
	if err := r.Client.Status().Patch(ctx, s, patch); err != nil {
		return fmt.Errorf("patching status of %s: %w", klog.KObj(s), err)
	}
	if was == nil || was.Phase != st.Phase {
		switch st.Phase {
		case snapshotv1.Succeeded:
			r.event(s, corev1.EventTypeNormal, "SuccessfulVirtualMachineSnapshot", "Snapshot of VirtualMachine %s taken", s.Spec.Source.Name)
		case snapshotv1.Failed:
			msg := ""
			if c := condition(st.Conditions, snapshotv1.ConditionFailure); c != nil {
				msg = c.Reason
			}
			r.event(s, corev1.EventTypeWarning, "VirtualMachineSnapshotFailed", "Snapshot of VirtualMachine %s failed: %s", s.Spec.Source.Name, msg)
		}
	}
	return nil
}

// take moves snapshot s on: locks its VM, makes its content and volume
// snapshots (the guest frozen meanwhile) and keeps the content's status.
func (r *SnapshotReconciler) take(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, now metav1.Time) (Observed, error) {
	var obs Observed
	if err := ValidateSnapshot(s); err != nil {
		// Admitted before the webhook knew the kind, or with it down.
		obs.Invalid = err.Error()
		return obs, nil
	}
	var err error
	if obs.VM, obs.VMI, err = r.source(ctx, s); err != nil || obs.VM == nil {
		return obs, err
	}
	vm := obs.VM
	content, err := r.content(ctx, s)
	if err != nil {
		return obs, err
	}
	obs.Locked = ptr.Deref(vm.Status.SnapshotInProgress, "") == s.Name
	if content == nil {
		if Done(s.Status) {
			return obs, nil
		}
		if !obs.Locked {
			if obs.Waiting, err = r.lock(ctx, s, vm); err != nil || obs.Waiting != "" {
				return obs, err
			}
			obs.Locked = true
		}
		claims, waiting, err := r.claims(ctx, vm)
		if err != nil || waiting != "" {
			obs.Waiting = waiting
			return obs, err
		}
		content = BuildContent(s, vm, claims)
		if err := r.Client.Create(ctx, content); err != nil {
			return obs, fmt.Errorf("creating %s: %w", klog.KObj(content), err)
		}
		r.event(s, corev1.EventTypeNormal, "SuccessfulVirtualMachineSnapshotContentCreate", "Successfully created VirtualMachineSnapshotContent %s", content.Name)
	}
	obs.Volumes = VolumeLists(content)
	if err := r.cut(ctx, s, content, obs.VMI, now); err != nil {
		return obs, err
	}
	obs.Content = content
	return obs, nil
}

// source is s's VM and its VMI (each nil when there is none).
func (r *SnapshotReconciler) source(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) (*v1.VirtualMachine, *v1.VirtualMachineInstance, error) {
	vm := &v1.VirtualMachine{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.Source.Name}, vm); {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading the source of %s: %w", klog.KObj(s), err)
	}
	vmi := &v1.VirtualMachineInstance{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(vm), vmi); {
	case apierrors.IsNotFound(err):
		return vm, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading the VMI of %s: %w", klog.KObj(vm), err)
	}
	return vm, vmi, nil
}

// content is s's content (nil: none), checked to be s's.
func (r *SnapshotReconciler) content(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) (*snapshotv1.VirtualMachineSnapshotContent, error) {
	c := &snapshotv1.VirtualMachineSnapshotContent{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: ContentName(s)}, c); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the content of %s: %w", klog.KObj(s), err)
	}
	if ptr.Deref(c.Spec.VirtualMachineSnapshotName, "") != s.Name {
		return nil, fmt.Errorf("%s exists and is not the content of %s", klog.KObj(c), klog.KObj(s))
	}
	return c, nil
}

// lock marks vm as being snapshotted by s, or says what holds it.
func (r *SnapshotReconciler) lock(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine) (string, error) {
	if other := ptr.Deref(vm.Status.SnapshotInProgress, ""); other != "" && other != s.Name {
		return fmt.Sprintf("snapshot %q in progress", other), nil
	}
	if restore := ptr.Deref(vm.Status.RestoreInProgress, ""); restore != "" {
		return fmt.Sprintf("restore %q in progress", restore), nil
	}
	patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	vm.Status.SnapshotInProgress = ptr.To(s.Name)
	if err := r.Client.Status().Patch(ctx, vm, patch); err != nil {
		if apierrors.IsConflict(err) {
			return "VirtualMachine changed meanwhile", nil
		}
		return "", fmt.Errorf("locking %s for %s: %w", klog.KObj(vm), klog.KObj(s), err)
	}
	return "", nil
}

// unlock clears vm's lock if s holds it.
func (r *SnapshotReconciler) unlock(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine) error {
	if ptr.Deref(vm.Status.SnapshotInProgress, "") != s.Name {
		return nil
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Status.SnapshotInProgress = nil
	if err := r.Client.Status().Patch(ctx, vm, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("unlocking %s after %s: %w", klog.KObj(vm), klog.KObj(s), err)
	}
	return nil
}

// claims are vm's volumes with claims, each with the VolumeSnapshotClass
// that can snapshot it; waiting says which is not ready to be.
func (r *SnapshotReconciler) claims(ctx context.Context, vm *v1.VirtualMachine) ([]VolumeClaim, string, error) {
	if vm.Spec.Template == nil {
		return nil, "", nil
	}
	classes := &vsv1.VolumeSnapshotClassList{}
	if err := r.Client.List(ctx, classes); err != nil {
		return nil, "", fmt.Errorf("listing VolumeSnapshotClasses: %w", err)
	}
	var out []VolumeClaim
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		name := vmisubset.Claim(vol)
		if name == "" {
			continue
		}
		if vol.DataVolume != nil {
			dv := &cdiv1.DataVolume{}
			switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: name}, dv); {
			case apierrors.IsNotFound(err):
				return nil, fmt.Sprintf("volume %s: DataVolume %s does not exist", vol.Name, name), nil
			case err != nil:
				return nil, "", err
			case dv.Status.Phase != cdiv1.Succeeded:
				return nil, fmt.Sprintf("volume %s: DataVolume %s is not populated (%s)", vol.Name, name, dv.Status.Phase), nil
			}
		}
		pvc := &corev1.PersistentVolumeClaim{}
		switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: name}, pvc); {
		case apierrors.IsNotFound(err):
			return nil, fmt.Sprintf("volume %s: PersistentVolumeClaim %s does not exist", vol.Name, name), nil
		case err != nil:
			return nil, "", err
		case pvc.Status.Phase != corev1.ClaimBound:
			return nil, fmt.Sprintf("volume %s: PersistentVolumeClaim %s is not bound", vol.Name, name), nil
		}
		vc := VolumeClaim{Volume: vol.Name, Claim: pvc}
		var err error
		if vc.SnapshotClass, err = r.snapshotClassOf(ctx, classes.Items, pvc); err != nil {
			return nil, "", err
		}
		out = append(out, vc)
	}
	return out, "", nil
}

// cut makes content's missing VolumeSnapshots while the guest is frozen,
// thaws it once all are cut, and stores the content's status.
func (r *SnapshotReconciler) cut(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, c *snapshotv1.VirtualMachineSnapshotContent, vmi *v1.VirtualMachineInstance, now metav1.Time) error {
	snaps, err := r.volumeSnapshots(ctx, s, c)
	if err != nil {
		return err
	}
	cutBefore := c.Status != nil && c.Status.CreationTime != nil
	freeze := canFreeze(vmi)
	var freezeErr error
	if !cutBefore && !Done(s.Status) {
		if freezeErr, err = r.createMissing(ctx, s, c, vmi, snaps); err != nil {
			return err
		}
	}
	st := ContentStatus(c, snaps, now)
	if freezeErr != nil {
		st.ReadyToUse = ptr.To(false)
		st.Error = &snapshotv1.Error{Time: ptr.To(now), Message: ptr.To(fmt.Sprintf("%s %s: %v", failedFreezeMsg, s.Spec.Source.Name, freezeErr))}
	}
	if !cutBefore && st.CreationTime != nil && freeze {
		if err := r.Guest.Unfreeze(ctx, vmi); err != nil {
			return fmt.Errorf("thawing %s after its volume snapshots: %w", klog.KObj(vmi), err)
		}
	}
	if equality.Semantic.DeepEqual(c.Status, st) {
		return nil
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Status = st
	if err := r.Client.Status().Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("patching status of %s: %w", klog.KObj(c), err)
	}
	return nil
}

// volumeSnapshots are content c's VolumeSnapshots, by name.
func (r *SnapshotReconciler) volumeSnapshots(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, c *snapshotv1.VirtualMachineSnapshotContent) (map[string]*vsv1.VolumeSnapshot, error) {
	list := &vsv1.VolumeSnapshotList{}
	if err := r.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{SnapshotLabel: s.Name}); err != nil {
		return nil, fmt.Errorf("listing the volume snapshots of %s: %w", klog.KObj(s), err)
	}
	snaps := map[string]*vsv1.VolumeSnapshot{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], c) {
			snaps[list.Items[i].Name] = &list.Items[i]
		}
	}
	return snaps, nil
}

// createMissing creates the VolumeSnapshots of c that snaps lacks (adding
// them), freezing vmi's guest first when it can be; freezeErr is why it
// could not be (nothing is created then). Their classes are looked up
// before the freeze, which lasts only while they are created.
func (r *SnapshotReconciler) createMissing(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, c *snapshotv1.VirtualMachineSnapshotContent, vmi *v1.VirtualMachineInstance, snaps map[string]*vsv1.VolumeSnapshot) (freezeErr, err error) {
	var missing []*vsv1.VolumeSnapshot
	classes := &vsv1.VolumeSnapshotClassList{}
	for _, b := range c.Spec.VolumeBackups {
		if snaps[ptr.Deref(b.VolumeSnapshotName, "")] != nil {
			continue
		}
		if len(missing) == 0 {
			if err := r.Client.List(ctx, classes); err != nil {
				return nil, fmt.Errorf("listing VolumeSnapshotClasses: %w", err)
			}
		}
		claim := &corev1.PersistentVolumeClaim{Spec: b.PersistentVolumeClaim.Spec}
		class, err := r.snapshotClassOf(ctx, classes.Items, claim)
		if err != nil {
			return nil, err
		}
		if class == "" {
			return nil, fmt.Errorf("no VolumeSnapshotClass for the storage class of claim %s", b.PersistentVolumeClaim.Name)
		}
		vs := VolumeSnapshotFor(c, b, class)
		if err := controllerutil.SetControllerReference(c, vs, r.Client.Scheme()); err != nil {
			return nil, err
		}
		missing = append(missing, vs)
	}
	if len(missing) > 0 && canFreeze(vmi) {
		if err := r.Guest.Freeze(ctx, vmi, deadline(s)); err != nil {
			return err, nil
		}
	}
	for _, vs := range missing {
		if err := r.Client.Create(ctx, vs); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s: %w", klog.KObj(vs), err)
		}
		r.event(s, corev1.EventTypeNormal, "SuccessfulVolumeSnapshotCreate", "Successfully created VolumeSnapshot %s", vs.Name)
		snaps[vs.Name] = vs
	}
	return nil, nil
}

// snapshotClassOf is, of classes, the VolumeSnapshotClass of the driver of
// claim's storage class ("" when there is none).
func (r *SnapshotReconciler) snapshotClassOf(ctx context.Context, classes []vsv1.VolumeSnapshotClass, claim *corev1.PersistentVolumeClaim) (string, error) {
	name := ptr.Deref(claim.Spec.StorageClassName, "")
	if name == "" {
		return "", nil
	}
	sc := &storagev1.StorageClass{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: name}, sc); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading StorageClass %s: %w", name, err)
	}
	return snapshotClassFor(classes, sc.Provisioner), nil
}

// thaw thaws vmi's file systems, logging a failure (the freeze ends by
// itself at the snapshot's deadline).
func (r *SnapshotReconciler) thaw(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot, vmi *v1.VirtualMachineInstance) {
	if err := r.Guest.Unfreeze(ctx, vmi); err != nil {
		r.event(s, corev1.EventTypeWarning, "UnfreezeFailed", "Thawing VirtualMachineInstance %s: %v", vmi.Name, err)
	}
}

// finalize lets deleted snapshot s go: its content deleted (unless
// retained and ready), the guest thawed, the VM unlocked.
func (r *SnapshotReconciler) finalize(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) error {
	if !controllerutil.ContainsFinalizer(s, snapshotFinalizer) {
		return nil
	}
	c, err := r.content(ctx, s)
	if err != nil {
		return err
	}
	retain := ptr.Deref(s.Spec.DeletionPolicy, snapshotv1.VirtualMachineSnapshotContentDelete) == snapshotv1.VirtualMachineSnapshotContentRetain
	if c != nil && (!retain || !contentReady(c)) {
		if err := r.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", klog.KObj(c), err)
		}
	}
	if err := r.release(ctx, s); err != nil {
		return err
	}
	patch := client.MergeFrom(s.DeepCopy())
	controllerutil.RemoveFinalizer(s, snapshotFinalizer)
	if err := r.Client.Patch(ctx, s, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of %s: %w", klog.KObj(s), err)
	}
	return nil
}

// release thaws and unlocks s's VM if s holds it.
func (r *SnapshotReconciler) release(ctx context.Context, s *snapshotv1.VirtualMachineSnapshot) error {
	vm, vmi, err := r.source(ctx, s)
	if err != nil || vm == nil {
		return err
	}
	if ptr.Deref(vm.Status.SnapshotInProgress, "") != s.Name {
		return nil
	}
	if canFreeze(vmi) {
		r.thaw(ctx, s, vmi)
	}
	return r.unlock(ctx, s, vm)
}

func (r *SnapshotReconciler) event(o client.Object, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(o, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager watches snapshots, their contents and volume snapshots.
func (r *SnapshotReconciler) SetupWithManager(mgr manager.Manager) error {
	if r.Guest == nil {
		return errors.New("vmsnapshot: a SnapshotReconciler needs a Guest")
	}
	bySnapshot := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := ""
		switch o := o.(type) {
		case *snapshotv1.VirtualMachineSnapshotContent:
			name = ptr.Deref(o.Spec.VirtualMachineSnapshotName, "")
		default:
			name = o.GetLabels()[SnapshotLabel]
		}
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
	})
	return builder.ControllerManagedBy(mgr).Named("vm-snapshot").
		For(&snapshotv1.VirtualMachineSnapshot{}).
		Watches(&snapshotv1.VirtualMachineSnapshotContent{}, bySnapshot).
		Watches(&vsv1.VolumeSnapshot{}, bySnapshot).
		Complete(r)
}

// contentReady reports whether c can be restored from.
func contentReady(c *snapshotv1.VirtualMachineSnapshotContent) bool {
	return c.Status != nil && ptr.Deref(c.Status.ReadyToUse, false)
}
