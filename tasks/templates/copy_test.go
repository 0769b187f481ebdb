package templates

import (
	"encoding/json"
	"testing"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
)

func TestCopyOfACommonTemplate(t *testing.T) {
	src := vmTemplate()
	src.Labels = map[string]string{
		vmtemplate.TypeLabel: "base", vmtemplate.OSLabelPrefix + "fedora": "true", vmtemplate.FlavorLabelPrefix + "small": "true",
		"template.kubevirt.io/version": "v1", "app.kubernetes.io/managed-by": "tekvirt", "team": "blue",
	}
	src.Annotations = map[string]string{"template.kubevirt.io/provider": "tekvirt", "description": "a VM", vmtemplate.OSNameAnnotationPrefix + "fedora": "Fedora"}
	src.Objects[0].Raw = []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
	  "metadata":{"name":"${NAME}","labels":{"app":"${NAME}","vm.kubevirt.io/template":"fedora-server-small","vm.kubevirt.io/template.revision":"1"},
	    "annotations":{"vm.kubevirt.io/validations":"[]","vm.kubevirt.io/os":"fedora"}},
	  "spec":{"template":{"metadata":{"labels":{"kubevirt.io/domain":"${NAME}","kubevirt.io/size":"small","keep":"me"}},"spec":{"domain":{"devices":{}}}}}}`)
	cp, err := Copy(src, "mine", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Name != "mine" || cp.Namespace != "tenant" || cp.GenerateName != "" {
		t.Errorf("copy is %s/%s (generateName %q)", cp.Namespace, cp.Name, cp.GenerateName)
	}
	wantLabels := map[string]string{vmtemplate.TypeLabel: TypeVM, "team": "blue"}
	if len(cp.Labels) != len(wantLabels) || cp.Labels["team"] != "blue" || cp.Labels[vmtemplate.TypeLabel] != TypeVM {
		t.Errorf("copy labels %v, want %v", cp.Labels, wantLabels)
	}
	if _, ok := cp.Annotations["template.kubevirt.io/provider"]; ok || cp.Annotations["description"] != "a VM" || cp.Annotations[vmtemplate.OSNameAnnotationPrefix+"fedora"] != "Fedora" {
		t.Errorf("copy annotations %v", cp.Annotations)
	}
	if src.Labels[vmtemplate.TypeLabel] != "base" || len(src.Labels) != 6 {
		t.Errorf("the source was changed: %v", src.Labels)
	}
	var vm struct {
		Metadata struct{ Labels, Annotations map[string]string }
		Spec     struct {
			Template struct {
				Metadata struct{ Labels map[string]string }
			}
		}
	}
	if err := json.Unmarshal(cp.Objects[0].Raw, &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Metadata.Labels[vmtemplate.TemplateLabel] != "mine" || vm.Metadata.Labels["app"] != "${NAME}" || len(vm.Metadata.Labels) != 2 {
		t.Errorf("VM labels %v", vm.Metadata.Labels)
	}
	if _, ok := vm.Metadata.Annotations["vm.kubevirt.io/os"]; ok || vm.Metadata.Annotations[vmtemplate.VMValidationsAnnotation] != "[]" {
		t.Errorf("VM annotations %v", vm.Metadata.Annotations)
	}
	if l := vm.Spec.Template.Metadata.Labels; len(l) != 1 || l["keep"] != "me" {
		t.Errorf("VMI template labels %v", l)
	}
	if !SameObjects(cp.Objects, cp.DeepCopy().Objects) || SameObjects(cp.Objects, src.Objects) {
		t.Errorf("SameObjects does not tell the copy's objects from the source's")
	}
}

func TestCopyOfAUserTemplate(t *testing.T) {
	src := vmTemplate()
	src.Labels = map[string]string{vmtemplate.OSLabelPrefix + "fedora": "true"}
	cp, err := Copy(src, "", "tenant")
	if err != nil {
		t.Fatal(err)
	}
	if cp.GenerateName != "fedora-server-small-" || cp.Labels[vmtemplate.OSLabelPrefix+"fedora"] != "true" || cp.Labels[vmtemplate.TypeLabel] != TypeVM {
		t.Errorf("copy %q labels %v", cp.GenerateName, cp.Labels)
	}
	if !SameObjects(cp.Objects, src.Objects) || len(cp.Parameters) != len(src.Parameters) {
		t.Errorf("a user template's objects or parameters changed in the copy")
	}
}
