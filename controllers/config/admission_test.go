package config_test

import (
	"context"
	"io/fs"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestAdmissionPoliciesCompile creates every admission policy and binding
// on a real API server, which type-checks their CEL: an expression that does
// not compile would otherwise first fail `tekvirt up`.
func TestAdmissionPoliciesCompile(t *testing.T) {
	cfg := testenv.Start(t)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(ctrlconfig.FS, "admission/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ctrlconfig.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	policies := 0
	for _, o := range objs {
		res := map[string]string{"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
			"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[o.GetKind()]
		if res == "" {
			t.Fatalf("admission/policies.yaml holds a %s", o.GetKind())
		}
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: res}
		if _, err := dyn.Resource(gvr).Create(context.Background(), o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "ValidatingAdmissionPolicy" {
			policies++
		}
	}
	if policies == 0 {
		t.Fatal("admission/policies.yaml holds no ValidatingAdmissionPolicy")
	}
}
