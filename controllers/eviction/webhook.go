package eviction

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/vmi"
)

// Path is where the webhook is served.
const Path = "/validate-pods-eviction"

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances/status,verbs=patch
// +kubebuilder:rbac:groups=hco.kubevirt.io,resources=hyperconvergeds,verbs=get;list;watch

// Webhook admits evictions of Pods: a launcher Pod's as its VMI's
// evictionStrategy says, every other Pod's untouched.
type Webhook struct {
	Client client.Client
	// Reader reads the VMI past the cache: an eviction right after the one
	// that marked it must see the mark, or it would evacuate it again.
	Reader client.Reader
	Log    logr.Logger
}

// Handle implements admission.Handler.
func (w Webhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "eviction" {
		return admission.Allowed("")
	}
	vmi, pod, err := w.launcherOf(ctx, req.Namespace, req.Name)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if vmi == nil || vmi.IsFinal() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return admission.Allowed("")
	}
	def, err := ClusterDefault(ctx, w.Client)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	strategy := Effective(vmi, def)
	d := Decide(strategy, vmi.Namespace, vmi.Name, vmi.Status.EvacuationNodeName != "", vmi.IsMigratable())
	log := w.Log.WithValues("vmi", vmi.Namespace+"/"+vmi.Name, "pod", pod.Name, "strategy", strategy, "user", req.UserInfo.Username)
	if d.Evacuate && (req.DryRun == nil || !*req.DryRun) {
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"status":{"evacuationNodeName":%q}}`, pod.Spec.NodeName))
		if err := w.Client.Status().Patch(ctx, vmi, patch); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("marking VMI %s/%s for evacuation: %w", vmi.Namespace, vmi.Name, err))
		}
		log.Info("eviction marked the VMI for evacuation", "node", pod.Spec.NodeName)
	}
	if d.Allow {
		log.Info("eviction allowed")
		return admission.Allowed("")
	}
	log.Info("eviction refused", "reason", d.Message)
	return admission.Response{AdmissionResponse: admissionResponse(d.Message)}
}

// launcherOf is the VMI whose launcher Pod namespace/name is, with the
// Pod; nil when the Pod is none.
func (w Webhook) launcherOf(ctx context.Context, namespace, name string) (*v1.VirtualMachineInstance, *corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	owner := metav1.GetControllerOf(pod)
	if pod.Labels[vmi.AppLabel] != vmi.AppLauncher || owner == nil || owner.Kind != "VirtualMachineInstance" {
		return nil, pod, nil
	}
	v := &v1.VirtualMachineInstance{}
	reader := w.Reader
	if reader == nil {
		reader = w.Client
	}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: owner.Name}, v); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, pod, nil
		}
		return nil, nil, err
	}
	if v.UID != owner.UID || pod.Labels[vmi.CreatedByLabel] != string(v.UID) {
		return nil, pod, nil
	}
	return v, pod, nil
}

// ClusterDefault is the HyperConverged's evictionStrategy, or nil.
func ClusterDefault(ctx context.Context, c client.Reader) (*v1.EvictionStrategy, error) {
	var list hcov1beta1.HyperConvergedList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("reading the HyperConverged: %w", err)
	}
	for _, hc := range list.Items {
		if hc.Spec.EvictionStrategy != nil {
			return hc.Spec.EvictionStrategy, nil
		}
	}
	return nil, nil
}
