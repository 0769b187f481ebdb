package hotplug

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// raceRetry is how soon a status write that lost a race to the handler is
// made again.
const raceRetry = 100 * time.Millisecond

// Reconciler gives each hotplugged volume of a running VMI its attachment
// Pod on the VMI's node, deletes the Pods of volumes taken out, and
// reports both in the VMI's status.volumeStatus.
type Reconciler struct {
	Client client.Client
	// Recorder records the VMI's events (nil: none).
	Recorder events.EventRecorder
	// Image runs the attachment Pods (the launcher image).
	Image string
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances/status,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one VMI's attachment Pods and hotplug volume status up
// to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &v1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !settled(vmi) {
		return ctrl.Result{}, nil
	}
	launcher, err := r.launcherPod(ctx, vmi)
	if err != nil || launcher == nil {
		return ctrl.Result{}, err
	}
	pods, extra, err := r.attachmentPods(ctx, vmi, launcher)
	if err != nil {
		return ctrl.Result{}, err
	}
	sources, err := r.sources(ctx, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := VolumeStatus(vmi, pods, sources)
	failed, err := r.carryOut(ctx, vmi, launcher, PlanPods(vmi, status, pods, sources), pods, extra)
	if err != nil {
		return ctrl.Result{}, err
	}
	status = VolumeStatus(vmi, pods, sources)
	for i, vs := range status {
		if err := failed[vs.Name]; err != nil {
			status[i].Phase, status[i].Reason = v1.VolumePending, ReasonFailedCreate
			status[i].Message = fmt.Sprintf("Error creating attachment pod for volume %s: %v", vs.Name, err)
		}
	}
	res, err := r.report(ctx, vmi, status)
	for name, ferr := range failed {
		err = errors.Join(err, fmt.Errorf("creating the attachment Pod of volume %s of %s: %w", name, klog.KObj(vmi), ferr))
	}
	return res, err
}

// carryOut creates and deletes the attachment Pods of plan (and extra),
// noting them in pods; it returns the creations that failed, by volume.
func (r *Reconciler) carryOut(ctx context.Context, vmi *v1.VirtualMachineInstance, launcher *corev1.Pod, plan Plan, pods map[string]*corev1.Pod, extra []*corev1.Pod) (map[string]error, error) {
	failed := map[string]error{}
	for _, vol := range plan.Create {
		pod := AttachmentPod(vmi, vol, launcher, r.Image)
		if err := r.Client.Create(ctx, pod); err != nil {
			failed[vol.Name] = err
			continue
		}
		ctrl.LoggerFrom(ctx).Info("attachment Pod created", "vmi", klog.KObj(vmi), "volume", vol.Name, "pod", pod.Name)
		pods[vol.Name] = pod
	}
	for _, pod := range append(plan.Delete, extra...) {
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting attachment Pod %s of %s: %w", pod.Name, klog.KObj(vmi), err)
		}
		ctrl.LoggerFrom(ctx).Info("attachment Pod deleted", "vmi", klog.KObj(vmi), "volume", podVolume(pod), "pod", pod.Name)
		now := metav1.Now()
		pod.DeletionTimestamp = &now
	}
	return failed, nil
}

// settled reports whether vmi runs where it is, neither being deleted
// (its attachment Pods go with the launcher Pod they belong to) nor
// migrating (a VM with hotplugged volumes does not migrate; others wait).
func settled(vmi *v1.VirtualMachineInstance) bool {
	if vmi.DeletionTimestamp != nil || vmi.Status.Phase != v1.Running {
		return false
	}
	ms := vmi.Status.MigrationState
	return ms == nil || ms.Completed || ms.Failed || ms.StartTimestamp == nil
}

// report writes status into vmi, only if its volume status is still the
// one read: the handler writes the phases that follow.
func (r *Reconciler) report(ctx context.Context, vmi *v1.VirtualMachineInstance, status []v1.VolumeStatus) (ctrl.Result, error) {
	if equality.Semantic.DeepEqual(status, vmi.Status.VolumeStatus) {
		return ctrl.Result{}, nil
	}
	base := vmi.DeepCopy()
	old := map[string]v1.VolumeStatus{}
	for _, vs := range base.Status.VolumeStatus {
		old[vs.Name] = vs
	}
	vmi.Status.VolumeStatus = status
	err := r.Client.Status().Patch(ctx, vmi, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: raceRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reporting the hotplug volumes of %s: %w", klog.KObj(vmi), err)
	}
	for _, vs := range status {
		if vs.HotplugVolume != nil && vs.Phase != old[vs.Name].Phase && vs.Reason != "" {
			kind := corev1.EventTypeNormal
			if vs.Phase == v1.VolumePending && vs.Reason != ReasonPVCNotReady || vs.Reason == ReasonFailedCreate {
				kind = corev1.EventTypeWarning
			}
			r.event(vmi, kind, vs.Reason, "%s", vs.Message)
		}
	}
	return ctrl.Result{}, nil
}

// launcherPod is the VMI's running launcher Pod on its node (nil: none).
func (r *Reconciler) launcherPod(ctx context.Context, vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	for uid, node := range vmi.Status.ActivePods {
		if node != vmi.Status.NodeName {
			continue
		}
		pods := &corev1.PodList{}
		if err := r.Client.List(ctx, pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{"kubevirt.io/created-by": string(vmi.UID)}); err != nil {
			return nil, fmt.Errorf("listing the launcher Pods of %s: %w", klog.KObj(vmi), err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.UID == uid && metav1.IsControlledBy(p, vmi) && p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				return p, nil
			}
		}
	}
	return nil, nil
}

// attachmentPods are the VMI's attachment Pods, by volume, of its current
// launcher Pod (a ready one first); extra are the others (of an earlier
// launcher Pod, or a second one of the same volume).
func (r *Reconciler) attachmentPods(ctx context.Context, vmi *v1.VirtualMachineInstance, launcher *corev1.Pod) (map[string]*corev1.Pod, []*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(vmi.Namespace), client.MatchingLabels{VMIUIDLabel: string(vmi.UID)}); err != nil {
		return nil, nil, fmt.Errorf("listing the attachment Pods of %s: %w", klog.KObj(vmi), err)
	}
	byVolume := map[string]*corev1.Pod{}
	var extra []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		name := podVolume(p)
		if name == "" || !metav1.IsControlledBy(p, launcher) {
			if p.DeletionTimestamp == nil {
				extra = append(extra, p)
			}
			continue
		}
		kept := byVolume[name]
		switch {
		case kept == nil:
			byVolume[name] = p
		case ready(p) && !ready(kept) || kept.DeletionTimestamp != nil && p.DeletionTimestamp == nil:
			byVolume[name] = p
			if kept.DeletionTimestamp == nil {
				extra = append(extra, kept)
			}
		case p.DeletionTimestamp == nil:
			extra = append(extra, p)
		}
	}
	return byVolume, extra, nil
}

// sources reads the claims and DataVolumes of the VMI's hotplugged volumes.
func (r *Reconciler) sources(ctx context.Context, vmi *v1.VirtualMachineInstance) (map[string]Source, error) {
	out := map[string]Source{}
	for _, vol := range vmi.Spec.Volumes {
		if !IsHotplug(vol) {
			continue
		}
		var s Source
		key := client.ObjectKey{Namespace: vmi.Namespace, Name: Claim(vol)}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, key, pvc); err == nil {
			s.Claim = pvc
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading claim %s of %s: %w", key.Name, klog.KObj(vmi), err)
		}
		if vol.DataVolume != nil {
			dv := &cdiv1.DataVolume{}
			if err := r.Client.Get(ctx, key, dv); err == nil {
				s.DataVolume = dv
			} else if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("reading DataVolume %s of %s: %w", key.Name, klog.KObj(vmi), err)
			}
		}
		out[vol.Name] = s
	}
	return out, nil
}

func (r *Reconciler) event(vmi *v1.VirtualMachineInstance, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(vmi, nil, kind, reason, "Hotplug", format, args...)
	}
}

// SetupWithManager watches VMIs, their attachment Pods, and the claims
// and DataVolumes their hotplugged volumes wait for.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[VMINameLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		}
		return nil
	})
	attachment := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[AppLabel] == AppHotplugDisk })
	return ctrl.NewControllerManagedBy(mgr).Named("vmi-hotplug").
		For(&v1.VirtualMachineInstance{}).
		Watches(&corev1.Pod{}, byLabel, builder.WithPredicates(attachment)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.vmisUsing)).
		Watches(&cdiv1.DataVolume{}, handler.EnqueueRequestsFromMapFunc(r.vmisUsing)).
		Complete(r)
}

// vmisUsing are the running VMIs of o's namespace that hotplug a claim
// named as o.
func (r *Reconciler) vmisUsing(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1.VirtualMachineInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, vmi := range list.Items {
		for _, vol := range vmi.Spec.Volumes {
			if IsHotplug(vol) && Claim(vol) == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vmi)})
				break
			}
		}
	}
	return out
}
