package templates

import (
	"errors"
	"fmt"
	"strings"

	templatev1 "github.com/openshift/api/template/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
)

// ParseParams reads kubevirt-tekton-tasks' templateParams: one KEY:VALUE
// per entry (the value may hold colons). An entry without a colon, an
// empty key or a key given twice is an error naming it.
func ParseParams(entries []string) (map[string]string, error) {
	return KeyValues("templateParams", entries)
}

// KeyValues reads the array param named param of KEY:VALUE entries, key
// and value trimmed of spaces (as kubevirt-tekton-tasks writes labels,
// "app: web").
func KeyValues(param string, entries []string) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for i, e := range entries {
		key, value, ok := strings.Cut(e, ":")
		key = strings.TrimSpace(key)
		switch {
		case !ok || key == "":
			errs = append(errs, fmt.Errorf("%s[%d] %q is not KEY:VALUE", param, i, e))
		default:
			if _, dup := out[key]; dup {
				errs = append(errs, fmt.Errorf("%s[%d]: %s given twice", param, i, key))
			}
			out[key] = strings.TrimSpace(value)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// VirtualMachine processes t with the supplied parameter values and
// returns the VirtualMachine it makes: the template must make exactly one
// object, a kubevirt.io/v1 VirtualMachine, which is decoded strictly (an
// unknown field is named by its path).
func VirtualMachine(t *templatev1.Template, supplied map[string]string) (*v1.VirtualMachine, error) {
	values, err := Resolve(t, supplied)
	if err != nil {
		return nil, err
	}
	objs, err := Process(t, values)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		kinds := make([]string, len(objs))
		for i, o := range objs {
			kinds[i] = o.GetKind()
		}
		return nil, fmt.Errorf("template %s/%s makes %d objects %v, want exactly one VirtualMachine", t.Namespace, t.Name, len(objs), kinds)
	}
	o := objs[0]
	if o.GetKind() != "VirtualMachine" || o.GetAPIVersion() != v1.GroupVersion.String() {
		return nil, fmt.Errorf("template %s/%s makes a %s %s, want a %s VirtualMachine", t.Namespace, t.Name, o.GetAPIVersion(), o.GetKind(), v1.GroupVersion)
	}
	vm := &v1.VirtualMachine{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, vm, true); err != nil {
		return nil, fmt.Errorf("template %s/%s: its VirtualMachine is not valid kubevirt.io/v1: %w", t.Namespace, t.Name, err)
	}
	if vm.Name == "" && vm.GenerateName == "" {
		return nil, fmt.Errorf("template %s/%s: its VirtualMachine has no name (set the template's NAME parameter)", t.Namespace, t.Name)
	}
	return vm, nil
}

// MarkOrigin labels vm, as KubeVirt's template tooling does, with the
// template it was made from and the template's OS, workload and flavor
// labels (on the VM and its VMI template, with the OS's display name as
// an annotation), and names the VM on its VMI template.
func MarkOrigin(vm *v1.VirtualMachine, t *templatev1.Template) {
	if vm.Labels == nil {
		vm.Labels = map[string]string{}
	}
	if vm.Spec.Template == nil {
		vm.Spec.Template = &v1.VirtualMachineInstanceTemplateSpec{}
	}
	vmi := &vm.Spec.Template.ObjectMeta
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	vm.Labels[vmtemplate.TemplateLabel] = t.Name
	vm.Labels[vmtemplate.TemplateNamespaceLabel] = t.Namespace
	for k, v := range t.Labels {
		if strings.HasPrefix(k, vmtemplate.OSLabelPrefix) || strings.HasPrefix(k, vmtemplate.WorkloadLabelPrefix) || strings.HasPrefix(k, vmtemplate.FlavorLabelPrefix) {
			vm.Labels[k], vmi.Labels[k] = v, v
		}
		if os, ok := strings.CutPrefix(k, vmtemplate.OSLabelPrefix); ok {
			if name := t.Annotations[vmtemplate.OSNameAnnotationPrefix+os]; name != "" {
				if vm.Annotations == nil {
					vm.Annotations = map[string]string{}
				}
				vm.Annotations[vmtemplate.OSNameAnnotationPrefix+os] = name
			}
		}
	}
	if vm.Name != "" {
		vmi.Labels[vmtemplate.VMNameLabel] = vm.Name
	}
}
