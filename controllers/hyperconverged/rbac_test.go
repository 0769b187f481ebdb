package hyperconverged

import (
	"io/fs"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
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
