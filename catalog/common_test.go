package catalog

import (
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/tasks/templates"
)

// TestCommonTemplatesProcess: every common template carries SSP's labels
// and parameters, and processed with its defaults gives exactly one
// VirtualMachine, strictly decodable, whose VMI spec tekvirt implements,
// booting from the golden DataSource.
func TestCommonTemplatesProcess(t *testing.T) {
	data, err := CommonTemplates()
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	n := 0
	for _, doc := range docs {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		n++
		tmpl := &templatev1.Template{}
		if err := yaml.UnmarshalStrict([]byte(doc), tmpl); err != nil {
			t.Fatalf("decoding a common template: %v", err)
		}
		for _, l := range []string{"template.kubevirt.io/type", "template.kubevirt.io/version"} {
			if tmpl.Labels[l] == "" {
				t.Errorf("%s lacks label %s", tmpl.Name, l)
			}
		}
		prefixes := map[string]bool{}
		for l := range tmpl.Labels {
			for _, p := range []string{"os.template.kubevirt.io/", "workload.template.kubevirt.io/", "flavor.template.kubevirt.io/"} {
				if strings.HasPrefix(l, p) {
					prefixes[p] = true
				}
			}
		}
		if len(prefixes) != 3 {
			t.Errorf("%s: os, workload and flavor labels %v", tmpl.Name, prefixes)
		}
		values, err := templates.Resolve(tmpl, map[string]string{"NAME": "vm1"})
		if err != nil {
			t.Fatalf("%s: %v", tmpl.Name, err)
		}
		for _, p := range []string{"NAME", "DATA_SOURCE_NAME", "DATA_SOURCE_NAMESPACE"} {
			if _, ok := values[p]; !ok {
				t.Errorf("%s has no parameter %s", tmpl.Name, p)
			}
		}
		objs, err := templates.Process(tmpl, values)
		if err != nil || len(objs) != 1 || objs[0].GetKind() != "VirtualMachine" {
			t.Fatalf("%s: %d objects, %v", tmpl.Name, len(objs), err)
		}
		raw, err := yaml.Marshal(objs[0].Object)
		if err != nil {
			t.Fatal(err)
		}
		vm := &v1.VirtualMachine{}
		if err := yaml.UnmarshalStrict(raw, vm); err != nil {
			t.Fatalf("%s: the VM does not decode strictly: %v", tmpl.Name, err)
		}
		if err := vmisubset.Check(&vm.Spec.Template.Spec); err != nil {
			t.Errorf("%s: %v", tmpl.Name, err)
		}
		ref := vm.Spec.DataVolumeTemplates[0].Spec.SourceRef
		if vm.Name != "vm1" || ref == nil || ref.Name != "guest" || *ref.Namespace != "tekvirt-os-images" {
			t.Errorf("%s: VM %s boots %+v", tmpl.Name, vm.Name, ref)
		}
		if vm.Labels["vm.kubevirt.io/template"] != tmpl.Name || vm.Annotations["vm.kubevirt.io/validations"] == "" {
			t.Errorf("%s: VM labels %v, validations %q", tmpl.Name, vm.Labels, vm.Annotations["vm.kubevirt.io/validations"])
		}
	}
	if n == 0 {
		t.Fatal("no common templates")
	}
}
