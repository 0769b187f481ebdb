package hyperconverged

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/catalog"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// TestOperatorMayBindEveryTaskRole keeps the bind rule of the generated
// controller role in step with the catalog: the controller can only create
// a task's RoleBinding if it may bind that task's ClusterRole.
func TestOperatorMayBindEveryTaskRole(t *testing.T) {
	data, err := fs.ReadFile(ctrlconfig.FS, "operator/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	var bindable []string
	for _, r := range role.Rules {
		if slices.Contains(r.Verbs, "bind") && slices.Contains(r.Resources, "clusterroles") {
			bindable = append(bindable, r.ResourceNames...)
		}
	}
	roles, err := catalog.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles {
		if !slices.Contains(bindable, r.GetName()) {
			t.Errorf("operator role may not bind %s: add it to the kubebuilder:rbac bind marker in reconciler.go and run make generate", r.GetName())
		}
	}
}

// TestOperatorBindingPolicyNamesEveryTaskRole keeps the admission policy
// that limits the operator's RoleBindings in step with the catalog: it
// lists the task roles by name (they are named <task>-task, as
// kubevirt-tekton-tasks names them, so no prefix marks them as tekvirt's).
func TestOperatorBindingPolicyNamesEveryTaskRole(t *testing.T) {
	data, err := fs.ReadFile(ctrlconfig.FS, "admission/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ctrlconfig.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var expr string
	for _, d := range docs {
		if d.GetKind() == "ValidatingAdmissionPolicy" && d.GetName() == "tekvirt-operator-rolebindings" {
			validations, _, _ := unstructured.NestedSlice(d.Object, "spec", "validations")
			for _, v := range validations {
				e, _, _ := unstructured.NestedString(v.(map[string]any), "expression")
				expr += e
			}
		}
	}
	if expr == "" {
		t.Fatal("no tekvirt-operator-rolebindings policy")
	}
	roles, err := catalog.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roles {
		if !strings.Contains(expr, `"`+r.GetName()+`"`) {
			t.Errorf("the operator's RoleBinding policy does not list task role %s: add it to admission/policies.yaml", r.GetName())
		}
	}
}
