package eviction

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/vmi"
)

// TestWebhook: an External VMI's launcher is refused with 429 and the VMI
// marked for evacuation from the Pod's node (not on a dry run); a Pod that
// only looks like a launcher (no VMI controls it) and an ordinary Pod are
// let through.
func TestWebhook(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, hcov1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	external := v1.EvictionStrategyExternal
	theVMI := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "u1"},
		Spec: v1.VirtualMachineInstanceSpec{EvictionStrategy: &external}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}}
	isController := true
	launcher := func(name string, owned bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{vmi.AppLabel: vmi.AppLauncher, vmi.CreatedByLabel: "u1"}},
			Spec: corev1.PodSpec{NodeName: "node2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: "vm", UID: "u1", Controller: &isController}}
		}
		return p
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1.VirtualMachineInstance{}).
		WithObjects(theVMI, launcher("virt-launcher-vm-x", true), launcher("look-alike", false),
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}).Build()
	w := Webhook{Client: c, Log: logr.Discard()}
	evict := func(pod string, dryRun bool) admission.Response {
		return w.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: "ns", Name: pod, SubResource: "eviction", Operation: admissionv1.Create, DryRun: &dryRun}})
	}
	for _, pod := range []string{"web", "look-alike", "gone"} {
		if r := evict(pod, false); !r.Allowed {
			t.Errorf("eviction of %s refused: %+v", pod, r.Result)
		}
	}
	got := &v1.VirtualMachineInstance{}
	r := evict("virt-launcher-vm-x", true)
	if r.Allowed || r.Result.Code != http.StatusTooManyRequests {
		t.Errorf("dry-run eviction of the launcher: %+v, want 429", r.Result)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(theVMI), got); err != nil || got.Status.EvacuationNodeName != "" {
		t.Errorf("a dry run marked the VMI: %q %v", got.Status.EvacuationNodeName, err)
	}
	r = evict("virt-launcher-vm-x", false)
	if r.Allowed || r.Result.Code != http.StatusTooManyRequests || !strings.Contains(r.Result.Message, `Eviction triggered evacuation of VMI "ns/vm"`) {
		t.Errorf("eviction of the launcher: %+v, want 429 triggering the evacuation", r.Result)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(theVMI), got); err != nil || got.Status.EvacuationNodeName != "node2" {
		t.Errorf("evacuationNodeName %q (%v), want node2", got.Status.EvacuationNodeName, err)
	}
}
