package templates

import (
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
)

func TestParseParams(t *testing.T) {
	got, err := ParseParams([]string{"NAME:vm1", "URL:http://host:8080/x", "EMPTY:"})
	if err != nil || got["NAME"] != "vm1" || got["URL"] != "http://host:8080/x" || got["EMPTY"] != "" || len(got) != 3 {
		t.Fatalf("ParseParams = %v, %v", got, err)
	}
	for name, tc := range map[string]struct {
		in   []string
		want string
	}{
		"no colon":  {[]string{"NAME=vm1"}, `templateParams[0] "NAME=vm1" is not KEY:VALUE`},
		"empty key": {[]string{"NAME:a", ":x"}, `templateParams[1] ":x"`},
		"twice":     {[]string{"NAME:a", "NAME:b"}, "templateParams[1]: NAME given twice"},
	} {
		if _, err := ParseParams(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func TestVirtualMachine(t *testing.T) {
	tmpl := vmTemplate()
	vm, err := VirtualMachine(tmpl, map[string]string{"NAME": "vm1", "CPU_CORES": "4"})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "vm1" || vm.Spec.Template.Spec.Domain.CPU.Cores != 4 || vm.Spec.DataVolumeTemplates[0].Spec.SourceRef.Name != "fedora" {
		t.Errorf("VM %s cores %d source %+v", vm.Name, vm.Spec.Template.Spec.Domain.CPU.Cores, vm.Spec.DataVolumeTemplates[0].Spec.SourceRef)
	}
	tmpl.Labels = map[string]string{
		vmtemplate.OSLabelPrefix + "fedora40": "true", vmtemplate.WorkloadLabelPrefix + "server": "true",
		vmtemplate.FlavorLabelPrefix + "small": "true", vmtemplate.TypeLabel: "base",
	}
	tmpl.Annotations = map[string]string{vmtemplate.OSNameAnnotationPrefix + "fedora40": "Fedora 40"}
	MarkOrigin(vm, tmpl)
	for k, v := range map[string]string{
		vmtemplate.TemplateLabel: "fedora-server-small", vmtemplate.TemplateNamespaceLabel: "openshift",
		vmtemplate.OSLabelPrefix + "fedora40": "true", vmtemplate.FlavorLabelPrefix + "small": "true",
	} {
		if vm.Labels[k] != v {
			t.Errorf("VM label %s = %q, want %q", k, vm.Labels[k], v)
		}
	}
	if _, copied := vm.Labels[vmtemplate.TypeLabel]; copied {
		t.Errorf("the template's type label was copied to the VM")
	}
	if l := vm.Spec.Template.ObjectMeta.Labels; l[vmtemplate.WorkloadLabelPrefix+"server"] != "true" || l[vmtemplate.VMNameLabel] != "vm1" {
		t.Errorf("VMI template labels %v", l)
	}
	if vm.Annotations[vmtemplate.OSNameAnnotationPrefix+"fedora40"] != "Fedora 40" {
		t.Errorf("annotations %v", vm.Annotations)
	}
}

// TestVirtualMachineBadInput: each refused with a message naming the
// template and the cause.
func TestVirtualMachineBadInput(t *testing.T) {
	twoObjects := vmTemplate()
	twoObjects.Objects = append(twoObjects.Objects, runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)})
	configMap := vmTemplate()
	configMap.Objects = []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`)}}
	unknownField := vmTemplate()
	unknownField.Objects = []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"x"},"spec":{"flavor":"small"}}`)}}
	required := vmTemplate()
	required.Parameters = append(required.Parameters, templatev1.Parameter{Name: "SSH_KEY", Required: true})
	noName := vmTemplate()
	noName.Parameters[0] = templatev1.Parameter{Name: "NAME"}
	for name, tc := range map[string]struct {
		tmpl   *templatev1.Template
		params map[string]string
		want   string
	}{
		"unknown param":    {vmTemplate(), map[string]string{"COLOUR": "blue"}, "template openshift/fedora-server-small has no parameter COLOUR"},
		"missing required": {required, nil, "required parameter SSH_KEY has no value"},
		"two objects":      {twoObjects, nil, "makes 2 objects [VirtualMachine ConfigMap], want exactly one VirtualMachine"},
		"not a VM":         {configMap, nil, "makes a v1 ConfigMap, want a kubevirt.io/v1 VirtualMachine"},
		"unknown field":    {unknownField, nil, `unknown field "spec.flavor"`},
		"name left empty":  {noName, nil, "its VirtualMachine has no name"},
	} {
		if _, err := VirtualMachine(tc.tmpl, tc.params); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
