package vmwebhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"
)

func request(t *testing.T, kind string, op admissionv1.Operation, manifest string) admission.Request {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: kind}, Operation: op,
		Object: runtime.RawExtension{Raw: raw},
	}}
}

func TestHandle(t *testing.T) {
	bad := strings.Replace(userGuideVM, "masquerade: {}", "sriov: {}", 1)
	v := Validator{}
	ctx := context.Background()
	if r := v.Handle(ctx, request(t, "VirtualMachine", admissionv1.Create, userGuideVM)); !r.Allowed {
		t.Errorf("good VM denied: %+v", r.Result)
	}
	r := v.Handle(ctx, request(t, "VirtualMachine", admissionv1.Update, bad))
	if r.Allowed || !strings.Contains(r.Result.Message, "interfaces[0].sriov") {
		t.Errorf("bad VM update: %+v", r.Result)
	}
	vmiSpec := "spec:\n  domain:\n    devices:\n      gpus: [{name: g, deviceName: x}]\n"
	if r := v.Handle(ctx, request(t, "VirtualMachineInstance", admissionv1.Create, vmiSpec)); r.Allowed || !strings.Contains(r.Result.Message, "spec.domain.devices.gpus") {
		t.Errorf("bad VMI create: %+v", r.Result)
	}
	if r := v.Handle(ctx, request(t, "VirtualMachineInstance", admissionv1.Update, vmiSpec)); !r.Allowed {
		t.Errorf("VMI update (the handler's status report) denied: %+v", r.Result)
	}
}
