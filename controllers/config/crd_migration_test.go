package config_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// migrationManifest is a VirtualMachineInstanceMigration as KubeVirt's
// user guide writes one, with the node selector a migration may add.
const migrationManifest = `
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceMigration
metadata:
  name: migration-job
spec:
  vmiName: vmi-fedora
  addedNodeSelector:
    kubernetes.io/hostname: node02
`

// policyManifest is a MigrationPolicy as KubeVirt's user guide writes one.
const policyManifest = `
apiVersion: migrations.kubevirt.io/v1alpha1
kind: MigrationPolicy
metadata:
  name: my-awesome-policy
spec:
  allowAutoConverge: true
  bandwidthPerMigration: 217Ki
  completionTimeoutPerGiB: 23
  allowPostCopy: false
  allowWorkloadDisruption: false
  selectors:
    namespaceSelector:
      hpc-workloads: "true"
    virtualMachineInstanceSelector:
      workload-type: db
`

// TestMigrationCRDsAcceptUpstreamManifests loads the generated migration
// CRDs into a real API server: KubeVirt's manifests are accepted unchanged
// under strict field validation (the policy cluster-scoped, as
// KubeVirt's), and an unknown field is rejected by name.
func TestMigrationCRDsAcceptUpstreamManifests(t *testing.T) {
	cfg := testenv.Start(t, "crd/kubevirt.io_virtualmachineinstancemigrations.yaml", "crd/migrations.kubevirt.io_migrationpolicies.yaml")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	for _, tc := range []struct {
		manifest string
		res      dynamic.ResourceInterface
		kept     []string // a field that must survive the round trip
		typo     []string // an unknown field, named in the refusal
	}{
		{
			manifest: migrationManifest,
			res:      dyn.Resource(schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}).Namespace("default"),
			kept:     []string{"spec", "vmiName"},
			typo:     []string{"spec", "vmiNamee"},
		},
		{
			manifest: policyManifest,
			res:      dyn.Resource(schema.GroupVersionResource{Group: "migrations.kubevirt.io", Version: "v1alpha1", Resource: "migrationpolicies"}),
			kept:     []string{"spec", "bandwidthPerMigration"},
			typo:     []string{"spec", "allowPostCopyy"},
		},
	} {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(tc.manifest), &obj); err != nil {
			t.Fatal(err)
		}
		got, err := tc.res.Create(context.Background(), &unstructured.Unstructured{Object: obj}, strict)
		if err != nil {
			t.Fatalf("upstream manifest rejected: %v\n%s", err, tc.manifest)
		}
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, tc.kept...); v == nil {
			t.Fatalf("%s: %s pruned", got.GetKind(), strings.Join(tc.kept, "."))
		}
		bad := &unstructured.Unstructured{Object: obj}
		bad.SetName("typo")
		if err := unstructured.SetNestedField(bad.Object, "x", tc.typo...); err != nil {
			t.Fatal(err)
		}
		field := tc.typo[len(tc.typo)-1]
		if _, err := tc.res.Create(context.Background(), bad, strict); err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("err = %v, want the unknown field %s named", err, field)
		}
	}
}
