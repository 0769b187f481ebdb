package templatevalidation

import (
	"encoding/json"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/catalog"
)

// TestCommonTemplateRules: the rules each common template's VM carries
// parse, pass the VM as the template writes it, and refuse it with too
// little memory.
func TestCommonTemplateRules(t *testing.T) {
	data, err := catalog.CommonTemplates()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		tmpl := &templatev1.Template{}
		if err := yaml.Unmarshal([]byte(doc), tmpl); err != nil {
			t.Fatal(err)
		}
		var vm struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Template map[string]any `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(tmpl.Objects[0].Raw, &vm); err != nil {
			t.Fatal(err)
		}
		rules, err := Parse(vm.Metadata.Annotations[VMAnnotation])
		if err != nil || len(rules) == 0 {
			t.Fatalf("%s: %d rules, %v", tmpl.Name, len(rules), err)
		}
		if res := Check(rules, vm.Spec.Template); len(res.Violations) > 0 {
			t.Errorf("%s: its own VM violates %q", tmpl.Name, res.Violations)
		}
		spec := vm.Spec.Template["spec"].(map[string]any)
		spec["domain"].(map[string]any)["memory"] = map[string]any{"guest": "64Mi"}
		if res := Check(rules, vm.Spec.Template); len(res.Violations) != 1 || !strings.Contains(res.Violations[0], "minimal-required-memory") {
			t.Errorf("%s with 64Mi: %q", tmpl.Name, res.Violations)
		}
	}
}
