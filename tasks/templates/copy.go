package templates

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	templatev1 "github.com/openshift/api/template/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
)

// A copy of a common template is the user's own: what marks a template
// as a common one, and who ships and manages it, stays behind.
var (
	commonTemplatePrefixes = []string{vmtemplate.OSLabelPrefix, vmtemplate.WorkloadLabelPrefix, vmtemplate.FlavorLabelPrefix, "app.kubernetes.io/", "operator-sdk/"}
	commonTemplateKeys     = []string{
		"template.kubevirt.io/version", "template.kubevirt.io/deprecated", "template.kubevirt.io/default-os-variant",
		"template.kubevirt.io/provider", "template.kubevirt.io/provider-support-level", "template.kubevirt.io/provider-url",
		"openshift.io/documentation-url", "openshift.io/provider-display-name", "openshift.io/support-url",
	}
	// commonVMKeys are the labels and annotations a common template's VM
	// carries about the template's revision and its size.
	commonVMKeys = []string{
		"vm.kubevirt.io/flavor", "vm.kubevirt.io/os", "vm.kubevirt.io/workload",
		"kubevirt.io/domain", "kubevirt.io/size", "vm.kubevirt.io/template.revision", "vm.kubevirt.io/template.version",
	}
)

// TypeVM is the type label's value on a user's template.
const TypeVM = "vm"

// IsCommon is whether t is a common template (template.kubevirt.io/type: base).
func IsCommon(t *templatev1.Template) bool { return t.Labels[vmtemplate.TypeLabel] == "base" }

// Copy returns a copy of src named name (generated from src's name when
// empty) in namespace, as a user's template (type vm). A common template's
// copy loses what marks it as common and as shipped by its provider, on
// the template and on its VirtualMachine, whose template label names the
// copy. Objects, parameters and the rest are kept as written.
func Copy(src *templatev1.Template, name, namespace string) (*templatev1.Template, error) {
	cp := src.DeepCopy()
	dst := &templatev1.Template{
		TypeMeta: metav1.TypeMeta{APIVersion: templatev1.GroupVersion.String(), Kind: "Template"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, Labels: cp.Labels, Annotations: cp.Annotations,
		},
		Message:      cp.Message,
		Objects:      cp.Objects,
		Parameters:   cp.Parameters,
		ObjectLabels: cp.ObjectLabels,
	}
	if name == "" {
		dst.GenerateName = src.Name + "-"
	}
	if IsCommon(src) {
		strip(dst.Labels, commonTemplatePrefixes, commonTemplateKeys)
		strip(dst.Annotations, commonTemplatePrefixes, commonTemplateKeys)
		for i, raw := range dst.Objects {
			obj := map[string]any{}
			if err := json.Unmarshal(objectJSON(raw), &obj); err != nil {
				return nil, fmt.Errorf("template %s/%s objects[%d] is not a JSON object: %w", src.Namespace, src.Name, i, err)
			}
			u := &unstructured.Unstructured{Object: obj}
			if u.GetKind() != "VirtualMachine" {
				continue
			}
			for _, path := range [][]string{{"metadata", "labels"}, {"metadata", "annotations"}, {"spec", "template", "metadata", "labels"}, {"spec", "template", "metadata", "annotations"}} {
				m, found, err := unstructured.NestedStringMap(obj, path...)
				if err != nil || !found {
					continue
				}
				strip(m, nil, commonVMKeys)
				if path[len(path)-1] == "labels" && len(path) == 2 && name != "" {
					m[vmtemplate.TemplateLabel] = name
				}
				if err := unstructured.SetNestedStringMap(obj, m, path...); err != nil {
					return nil, err
				}
			}
			data, err := json.Marshal(obj)
			if err != nil {
				return nil, err
			}
			dst.Objects[i].Raw, dst.Objects[i].Object = data, nil
		}
	}
	if dst.Labels == nil {
		dst.Labels = map[string]string{}
	}
	dst.Labels[vmtemplate.TypeLabel] = TypeVM
	return dst, nil
}

func objectJSON(raw runtime.RawExtension) []byte {
	if len(raw.Raw) > 0 || raw.Object == nil {
		return raw.Raw
	}
	data, _ := json.Marshal(raw.Object)
	return data
}

func strip(m map[string]string, prefixes, keys []string) {
	for k := range m {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				delete(m, k)
			}
		}
	}
	for _, k := range keys {
		delete(m, k)
	}
}

// SameObjects is whether two templates' objects are the same JSON.
func SameObjects(a, b []runtime.RawExtension) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		var x, y any
		if json.Unmarshal(objectJSON(a[i]), &x) != nil || json.Unmarshal(objectJSON(b[i]), &y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
