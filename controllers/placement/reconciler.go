package placement

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
)

// NodeNameLabel marks a placed VMI with its node, as KubeVirt does.
const NodeNameLabel = "kubevirt.io/nodeName"

// retryUnschedulable is how soon an unplaceable VMI is tried again when no
// node or VMI change comes first.
const retryUnschedulable = 15 * time.Second

// Reconciler places pending VMIs on nodes.
type Reconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances/status,verbs=get;update;patch

// Reconcile places one VMI if it waits for a node.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vmi := &v1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, vmi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !waiting(vmi) {
		return ctrl.Result{}, nil
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	var vmis v1.VirtualMachineInstanceList
	if err := r.Client.List(ctx, &vmis); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing VMIs: %w", err)
	}
	var placed []*v1.VirtualMachineInstance
	for i := range vmis.Items {
		if o := &vmis.Items[i]; o.Status.NodeName != "" && o.UID != vmi.UID && !finishedPhase(o.Status.Phase) {
			placed = append(placed, o)
		}
	}
	nodePtrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	d, err := Place(vmi, nodePtrs, placed)
	if err != nil {
		setScheduled(vmi, corev1.ConditionFalse, "InvalidScheduling", err.Error())
		vmi.Status.Phase = v1.Failed
		return ctrl.Result{}, r.Client.Status().Update(ctx, vmi)
	}
	now := metav1.Now()
	if d.Node == "" {
		RecordPhases(vmi, now, v1.Pending, v1.Scheduling)
		vmi.Status.Phase = v1.Scheduling
		setScheduled(vmi, corev1.ConditionFalse, corev1.PodReasonUnschedulable, d.Message)
		if err := r.Client.Status().Update(ctx, vmi); err != nil {
			return ctrl.Result{}, fmt.Errorf("reporting %s unschedulable: %w", klog.KObj(vmi), err)
		}
		return ctrl.Result{RequeueAfter: retryUnschedulable}, nil
	}
	vmi.Status.NodeName = d.Node
	RecordPhases(vmi, now, v1.Pending, v1.Scheduling, v1.Scheduled)
	vmi.Status.Phase = v1.Scheduled
	setScheduled(vmi, corev1.ConditionTrue, "", "")
	// An update, not a patch: its resourceVersion check keeps two placements
	// of the same VMI (a stale cache) from both landing.
	if err := r.Client.Status().Update(ctx, vmi); err != nil {
		return ctrl.Result{}, fmt.Errorf("placing %s on %s: %w", klog.KObj(vmi), d.Node, err)
	}
	// The label the node's handler selects its VMIs by comes second, so a
	// handler never sees a VMI of its node without status.nodeName.
	base := vmi.DeepCopy()
	metav1.SetMetaDataLabel(&vmi.ObjectMeta, NodeNameLabel, d.Node)
	if err := r.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("labelling %s with its node %s: %w", klog.KObj(vmi), d.Node, err)
	}
	ctrl.LoggerFrom(ctx).Info("placed VMI", "vmi", klog.KObj(vmi), "node", d.Node)
	return ctrl.Result{}, nil
}

// RecordPhases notes the phases a VMI went through in one placement, as
// KubeVirt's phaseTransitionTimestamps do: Pending since its creation, the
// others now. Phases already recorded keep their time.
func RecordPhases(vmi *v1.VirtualMachineInstance, now metav1.Time, phases ...v1.VirtualMachineInstancePhase) {
	for _, p := range phases {
		seen := false
		for _, ts := range vmi.Status.PhaseTransitionTimestamps {
			seen = seen || ts.Phase == p
		}
		if seen {
			continue
		}
		at := now
		if p == v1.Pending {
			at = vmi.CreationTimestamp
		}
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: at})
	}
}

func waiting(vmi *v1.VirtualMachineInstance) bool {
	p := vmi.Status.Phase
	return vmi.DeletionTimestamp == nil && vmi.Status.NodeName == "" && !launcherpod.InPod(vmi.Annotations) &&
		(p == v1.VmPhaseUnset || p == v1.Pending || p == v1.Scheduling)
}

func finishedPhase(p v1.VirtualMachineInstancePhase) bool { return p == v1.Succeeded || p == v1.Failed }

func setScheduled(vmi *v1.VirtualMachineInstance, status corev1.ConditionStatus, reason, msg string) {
	SetCondition(vmi, v1.VirtualMachineInstanceConditionType(corev1.PodScheduled), status, reason, msg)
}

// SetCondition sets the VMI condition t, keeping its transition time when
// its status stays.
func SetCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType, status corev1.ConditionStatus, reason, msg string) {
	c := v1.VirtualMachineInstanceCondition{
		Type: t, Status: status,
		Reason: reason, Message: msg, LastTransitionTime: metav1.Now(),
	}
	for i, old := range vmi.Status.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			vmi.Status.Conditions[i] = c
			return
		}
	}
	vmi.Status.Conditions = append(vmi.Status.Conditions, c)
}

// SetupWithManager watches VMIs, and nodes so that a node becoming ready or
// gaining room retries the waiting VMIs.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("vmi-placement").
		For(&v1.VirtualMachineInstance{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.waitingVMIs)).
		Complete(r)
}

func (r *Reconciler) waitingVMIs(ctx context.Context, _ client.Object) []reconcile.Request {
	var vmis v1.VirtualMachineInstanceList
	if err := r.Client.List(ctx, &vmis); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing VMIs")
		return nil
	}
	var out []reconcile.Request
	for i := range vmis.Items {
		if waiting(&vmis.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vmis.Items[i])})
		}
	}
	return out
}
