package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

var hcoGVR = schema.GroupVersionResource{Group: "hco.kubevirt.io", Version: "v1beta1", Resource: "hyperconvergeds"}

// TestHyperConvergedUnsupportedFieldIsNamed applies an upstream
// HyperConverged field tekvirt does not support, as kubectl does (strict
// field validation), and expects an error naming it, with nothing changed.
func TestHyperConvergedUnsupportedFieldIsNamed(t *testing.T) {
	f := framework.New(t)
	dyn, err := dynamic.NewForConfig(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	hcs := dyn.Resource(hcoGVR).Namespace("tekvirt-system")
	before, err := hcs.Get(context.Background(), "kubevirt-hyperconverged", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("default HyperConverged: %v", err)
	}
	manifest := []byte(`{"apiVersion":"hco.kubevirt.io/v1beta1","kind":"HyperConverged",
		"metadata":{"name":"kubevirt-hyperconverged","namespace":"tekvirt-system"},
		"spec":{"tektonPipelinesNamespace":"tekvirt","liveMigrationConfig":{"network":"migration-net"}}}`)
	force := true
	_, err = hcs.Patch(context.Background(), "kubevirt-hyperconverged", types.ApplyPatchType, manifest,
		metav1.PatchOptions{FieldManager: "e2e", Force: &force, FieldValidation: "Strict"})
	if err == nil || !strings.Contains(err.Error(), "spec.liveMigrationConfig.network") {
		t.Fatalf("err = %v, want an error naming spec.liveMigrationConfig.network", err)
	}
	after, err := hcs.Get(context.Background(), "kubevirt-hyperconverged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetGeneration() != before.GetGeneration() {
		t.Fatalf("rejected apply changed the object: generation %d -> %d", before.GetGeneration(), after.GetGeneration())
	}
}
