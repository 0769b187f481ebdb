package vmi

import (
	"context"
	"fmt"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// Reconciler gives each VMI its launcher Pod and mirrors the Pod's
// scheduling into the VMI; the node's handler takes it from Scheduled.
type Reconciler struct {
	Client client.Client
	// Reader reads what the controller may get but not list or watch: a
	// VMI's Node, and only when a deleted VMI's node may be gone.
	Reader client.Reader
	// Recorder records the VMI's events, as KubeVirt's virt-controller
	// does (nil: none).
	Recorder events.EventRecorder
	// LauncherImage runs the launcher Pods.
	LauncherImage string
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=k8s.cni.cncf.io,resources=network-attachment-definitions,verbs=get;list;watch

// Reconcile creates the VMI's launcher Pod and reports where it runs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &v1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if vmi.DeletionTimestamp != nil {
		return ctrl.Result{}, r.releaseFromGoneNode(ctx, vmi)
	}
	if vmi.Status.Phase == v1.Succeeded || vmi.Status.Phase == v1.Failed {
		return ctrl.Result{}, nil
	}
	pod, err := r.launcherPod(ctx, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod == nil && (vmi.Status.Phase == v1.VmPhaseUnset || vmi.Status.Phase == v1.Pending) {
		if pod, err = r.createPod(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	if pod != nil && pod.Status.Phase == corev1.PodSucceeded && pod.DeletionTimestamp == nil {
		return ctrl.Result{}, nil // the guest stopped: the handler reports how
	}
	return ctrl.Result{}, r.mirror(ctx, vmi, pod)
}

// launcherPod is the VMI's Pod, or nil. Only a Pod the VMI controls (one
// this controller made) counts: a tenant's own Pod with the same label is
// not where the node's handler prepares the VM. Once the VMI runs, its Pod
// is the active one on its node, or on its migration's target once the
// migration completed (the source's Pod ends then, before the target's
// handler takes the VMI over); before, the one that is no migration's
// target.
func (r *Reconciler) launcherPod(ctx context.Context, vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	pods, err := r.launcherPods(ctx, vmi)
	if err != nil {
		return nil, err
	}
	node := vmi.Status.NodeName
	if ms := vmi.Status.MigrationState; ms != nil && ms.Completed && ms.TargetNode != "" {
		node = ms.TargetNode
	}
	for i := range pods {
		p := &pods[i]
		if node != "" && len(vmi.Status.ActivePods) > 0 {
			if vmi.Status.ActivePods[p.UID] == node {
				return p, nil
			}
			continue
		}
		if p.Labels[v1.MigrationJobLabel] == "" {
			return p, nil
		}
	}
	return nil, nil
}

// createPod creates the launcher Pod. When a NetworkAttachmentDefinition
// it names is missing, or the API server refuses it (quota, LimitRange,
// Pod Security, a missing ServiceAccount), the VMI
// says why, as KubeVirt's: Synchronized=False with reason FailedCreate and
// the server's message, and a FailedCreate event; the error requeues the
// VMI with backoff.
func (r *Reconciler) createPod(ctx context.Context, vmi *v1.VirtualMachineInstance) (*corev1.Pod, error) {
	err := r.networkAttachments(ctx, vmi)
	var pod *corev1.Pod
	if err == nil {
		pod, err = LauncherPod(vmi, r.LauncherImage)
	}
	if err == nil {
		err = r.Client.Create(ctx, pod)
	}
	if err != nil {
		r.event(vmi, corev1.EventTypeWarning, FailedCreateReason, "Error creating pod: %v", err)
		if serr := r.setSynchronized(ctx, vmi, corev1.ConditionFalse, FailedCreateReason, "failed to create virtual machine pod: "+err.Error()); serr != nil {
			return nil, serr
		}
		return nil, fmt.Errorf("creating the launcher Pod of %s: %w", klog.KObj(vmi), err)
	}
	ctrl.LoggerFrom(ctx).Info("launcher Pod created", "vmi", klog.KObj(vmi), "pod", pod.Name)
	r.event(vmi, corev1.EventTypeNormal, "SuccessfulCreate", "Created virtual machine pod %s", pod.Name)
	return pod, r.setSynchronized(ctx, vmi, "", "", "")
}

// setSynchronized sets the VMI's Synchronized condition, or removes it
// when status is empty (the Pod was made after all).
func (r *Reconciler) setSynchronized(ctx context.Context, vmi *v1.VirtualMachineInstance, status corev1.ConditionStatus, reason, msg string) error {
	base := vmi.DeepCopy()
	if status == "" {
		RemoveCondition(vmi, v1.VirtualMachineInstanceSynchronized)
	} else {
		SetCondition(vmi, v1.VirtualMachineInstanceSynchronized, status, reason, msg)
	}
	if equality.Semantic.DeepEqual(base.Status.Conditions, vmi.Status.Conditions) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("reporting on %s that its launcher Pod was not created: %w", klog.KObj(vmi), err)
	}
	return nil
}

// mirror writes the Pod's scheduling into the VMI: its phase up to
// Scheduled (the handler's from there), its node, the scheduler's message,
// or its failure when the Pod ended or went away.
func (r *Reconciler) mirror(ctx context.Context, vmi *v1.VirtualMachineInstance, pod *corev1.Pod) error {
	s := SchedulingOf(pod)
	started := vmi.Status.Phase == v1.Scheduled || vmi.Status.Phase == v1.Running
	base := vmi.DeepCopy()
	now := metav1.Now()
	switch {
	case s.Phase == v1.Failed || started && pod == nil:
		vmi.Status.Phase = v1.Failed
		SetCondition(vmi, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, LauncherPodEndedReason, FailureMessage(pod))
		r.event(vmi, corev1.EventTypeWarning, LauncherPodEndedReason, "%s", FailureMessage(pod))
	case started:
		return nil
	case s.Phase == v1.Scheduled:
		claims, err := r.claims(ctx, vmi)
		if err != nil {
			return err
		}
		vmi.Status.VolumeStatus = VolumeStatus(vmi, claims)
		vmi.Status.NodeName = s.NodeName
		// As KubeVirt's: the node's handler finds the Pod's volumes by its UID.
		vmi.Status.ActivePods = map[types.UID]string{pod.UID: s.NodeName}
		RecordPhases(vmi, now, v1.Pending, v1.Scheduling, v1.Scheduled)
		vmi.Status.Phase = v1.Scheduled
		SetCondition(vmi, PodScheduledCondition, corev1.ConditionTrue, "", "")
	case s.Phase == v1.Scheduling:
		RecordPhases(vmi, now, v1.Pending, v1.Scheduling)
		vmi.Status.Phase = v1.Scheduling
		if c := s.PodScheduled; c != nil {
			SetCondition(vmi, PodScheduledCondition, c.Status, c.Reason, c.Message)
		}
	default:
		vmi.Status.Phase = v1.Pending
	}
	if err := r.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("reporting the launcher Pod of %s: %w", klog.KObj(vmi), err)
	}
	if vmi.Status.Phase != v1.Scheduled || vmi.Labels[v1.NodeNameLabel] == s.NodeName {
		return nil
	}
	// The label the node's handler selects its VMIs by comes second, so a
	// handler never sees a VMI of its node without status.nodeName.
	base = vmi.DeepCopy()
	metav1.SetMetaDataLabel(&vmi.ObjectMeta, v1.NodeNameLabel, s.NodeName)
	if err := r.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling %s with its node %s: %w", klog.KObj(vmi), s.NodeName, err)
	}
	ctrl.LoggerFrom(ctx).Info("VMI scheduled", "vmi", klog.KObj(vmi), "node", s.NodeName)
	return nil
}

func (r *Reconciler) event(vmi *v1.VirtualMachineInstance, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(vmi, nil, kind, reason, reason, format, args...)
	}
}

// SetupWithManager watches VMIs and their launcher Pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	launchers := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[AppLabel] == AppLauncher })
	return ctrl.NewControllerManagedBy(mgr).Named("vmi-launcher-pod").
		For(&v1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}, builder.WithPredicates(launchers)).
		Complete(r)
}

// networkAttachments checks that the NetworkAttachmentDefinition of each
// of vmi's Multus networks exists, as KubeVirt's controller does before it
// makes the Pod: Multus would otherwise leave the Pod without a sandbox,
// saying why only in the Pod's events.
func (r *Reconciler) networkAttachments(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	for i, n := range vmi.Spec.Networks {
		if n.Multus == nil {
			continue
		}
		ns, name, err := podnetwork.NetworkAttachment(n.Multus.NetworkName, vmi.Namespace)
		if err != nil {
			return fmt.Errorf("spec.networks[%d].multus.%w", i, err)
		}
		nad := &metav1.PartialObjectMetadata{}
		nad.SetGroupVersionKind(nadv1.SchemeGroupVersion.WithKind("NetworkAttachmentDefinition"))
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nad); err != nil {
			return fmt.Errorf("failed to locate network attachment definition %s/%s (spec.networks[%d] %s): %w", ns, name, i, n.Name, err)
		}
	}
	return nil
}
