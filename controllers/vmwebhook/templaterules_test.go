package vmwebhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const memoryRule = `[{"name": "minimal-required-memory", "path": "jsonpath::.spec.domain.resources.requests.memory", "rule": "integer",
  "message": "This VM requires more memory.", "min": 33554432},
 {"name": "cores", "path": "jsonpath::.spec.domain.cpu.cores", "rule": "integer", "message": "One core is plenty.", "max": 1, "justWarning": true}]`

// TestTemplateRules: a VM made from a template is checked against the
// rules it carries or, without them, its template's; a violation refuses
// it with the rule's message, a justWarning rule only warns; a template
// that is gone is a warning; an update that leaves the VMI template
// alone is not checked again.
func TestTemplateRules(t *testing.T) {
	s := runtime.NewScheme()
	if err := templatev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(s).WithObjects(&templatev1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openshift", Name: "tiny", Annotations: map[string]string{"validations": memoryRule}}}).Build()
	// alice may read templates anywhere (sarClient), mallory may not.
	v := Validator{Reader: reader, Client: sarClient(t)}
	ctx := context.Background()
	as := func(user string, req admission.Request) admission.Request {
		req.UserInfo.Username = user
		return req
	}
	labelled := strings.Replace(userGuideVM, "spec:\n  runStrategy", "metadata:\n  labels:\n    vm.kubevirt.io/template: tiny\n    vm.kubevirt.io/template.namespace: openshift\nspec:\n  runStrategy", 1)
	r := v.Handle(ctx, as("alice", request(t, "VirtualMachine", admissionv1.Create, labelled)))
	if !r.Allowed || len(r.Warnings) != 0 {
		t.Fatalf("a VM within its template's rules: %+v %v", r.Result, r.Warnings)
	}
	small := strings.Replace(labelled, "memory: 64M", "memory: 16Mi", 1)
	if r := v.Handle(ctx, as("alice", request(t, "VirtualMachine", admissionv1.Create, small))); r.Allowed || !strings.Contains(r.Result.Message, "This VM requires more memory. (rule minimal-required-memory") {
		t.Errorf("too little memory: %+v", r.Result)
	}
	twoCores := strings.Replace(labelled, "cores: 1", "cores: 2", 1)
	if r := v.Handle(ctx, as("alice", request(t, "VirtualMachine", admissionv1.Create, twoCores))); !r.Allowed || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "One core is plenty.") {
		t.Errorf("a justWarning rule: allowed %v warnings %v", r.Allowed, r.Warnings)
	}
	// The VM's own copy of the rules wins over its template's.
	own := strings.Replace(small, "  labels:\n", "  annotations:\n    vm.kubevirt.io/validations: '[]'\n  labels:\n", 1)
	if r := v.Handle(ctx, as("alice", request(t, "VirtualMachine", admissionv1.Create, own))); !r.Allowed {
		t.Errorf("a VM carrying its own (empty) rules: %+v", r.Result)
	}
	gone := strings.Replace(labelled, "template: tiny", "template: deleted", 1)
	if r := v.Handle(ctx, as("alice", request(t, "VirtualMachine", admissionv1.Create, gone))); !r.Allowed || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "openshift/deleted") {
		t.Errorf("a VM whose template is gone: allowed %v warnings %v", r.Allowed, r.Warnings)
	}
	// A template whose rules are on its VirtualMachine object.
	objRules := &templatev1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: "openshift", Name: "obj"},
		Objects: []runtime.RawExtension{{Raw: []byte(`{"kind":"VirtualMachine","metadata":{"annotations":{"vm.kubevirt.io/validations":` + strconvQuote(memoryRule) + `}}}`)}}}
	if err := reader.Create(ctx, objRules); err != nil {
		t.Fatal(err)
	}
	if r := v.Handle(ctx, as("alice", request(t, "VirtualMachine", admissionv1.Create, strings.Replace(small, "template: tiny", "template: obj", 1)))); r.Allowed ||
		!strings.Contains(r.Result.Message, "rule minimal-required-memory") {
		t.Errorf("rules on the template's VM object: %+v", r.Result)
	}
	// Another namespace's template is read only for a user who may read it.
	if r := v.Handle(ctx, as("mallory", request(t, "VirtualMachine", admissionv1.Create, small))); !r.Allowed || len(r.Warnings) != 1 ||
		!strings.Contains(r.Warnings[0], "mallory may not read template openshift/tiny") {
		t.Errorf("mallory's VM naming a template she may not read: allowed %v warnings %v", r.Allowed, r.Warnings)
	}
	// Admitted before the rule changed: a run strategy change goes through.
	update := request(t, "VirtualMachine", admissionv1.Update, strings.Replace(small, "runStrategy: Halted", "runStrategy: Always", 1))
	update.OldObject = request(t, "VirtualMachine", admissionv1.Update, small).Object
	if r := v.Handle(ctx, update); !r.Allowed {
		t.Errorf("a run strategy change of an admitted VM: %+v", r.Result)
	}
}

func strconvQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}
