package vmwebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	templatev1 "github.com/openshift/api/template/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/requester"
	"github.com/tekvirt/tekvirt/controllers/templatevalidation"
)

// +kubebuilder:rbac:groups=template.openshift.io,resources=templates,verbs=get

// templateRules applies the validation rules of the template a VM was
// made from, as SSP's virt-template-validator does: the VM's own copy of
// them (its vm.kubevirt.io/validations annotation), else those of the
// template its labels name (rulesOf). A violated rule refuses the VM with the
// rule's message; justWarning rules, and a template that no longer
// exists, are warnings.
func (v Validator) templateRules(ctx context.Context, user authnv1.UserInfo, raw []byte, vm *kubevirtv1.VirtualMachine) ([]string, error) {
	annotation, ok := vm.Annotations[templatevalidation.VMAnnotation]
	name, ns := vm.Labels[templatevalidation.TemplateLabel], vm.Labels[templatevalidation.TemplateNamespaceLabel]
	if !ok && name == "" {
		return nil, nil
	}
	if !ok {
		if ns == "" {
			ns = vm.Namespace
		}
		// The webhook reads with the controller's rights: another
		// namespace's template only for a user who may read it there.
		if ns != vm.Namespace {
			allowed, err := requester.Allowed(ctx, v.Client, user, &authzv1.ResourceAttributes{Namespace: ns, Verb: "get",
				Group: templatev1.GroupName, Resource: "templates", Name: name})
			if err != nil {
				return nil, fmt.Errorf("checking whether %s may read template %s/%s: %w", user.Username, ns, name, err)
			}
			if !allowed {
				return []string{fmt.Sprintf("%s may not read template %s/%s: its validation rules were not applied", user.Username, ns, name)}, nil
			}
		}
		t := &templatev1.Template{}
		err := v.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)
		if apierrors.IsNotFound(err) {
			return []string{fmt.Sprintf("template %s/%s the VM was made from does not exist: its validation rules were not applied", ns, name)}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading template %s/%s: %w", ns, name, err)
		}
		if annotation = rulesOf(t); annotation == "" {
			return nil, nil
		}
	}
	rules, err := templatevalidation.Parse(annotation)
	if err != nil {
		return nil, fmt.Errorf("VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	var obj struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, decodeError{fmt.Errorf("decoding the VirtualMachine: %w", err)}
	}
	res := templatevalidation.Check(rules, obj.Spec.Template)
	if len(res.Violations) > 0 {
		return res.Warnings, fmt.Errorf("VirtualMachine %s/%s violates the rules of its template: %s", vm.Namespace, vm.Name, strings.Join(res.Violations, "; "))
	}
	return res.Warnings, nil
}

// rulesOf is a template's rules: its validations annotation, else those
// its VirtualMachine object carries (what a VM made from it would have).
func rulesOf(t *templatev1.Template) string {
	if a := t.Annotations[templatevalidation.TemplateAnnotation]; a != "" {
		return a
	}
	for _, o := range t.Objects {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if json.Unmarshal(o.Raw, &obj) == nil && obj.Kind == "VirtualMachine" {
			return obj.Metadata.Annotations[templatevalidation.VMAnnotation]
		}
	}
	return ""
}
