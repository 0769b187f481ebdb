package e2e

import (
	"context"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/templatevalidation"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestCommonTemplatesAndValidator: the operator served the Template API
// and installed the common templates into the default common templates
// namespace; a VM labelled as made from one is refused when it breaks the
// template's rules (too little memory), naming the rule, and admitted
// within them; a VM naming a template that does not exist is admitted
// with a warning. Dry runs: nothing boots, nothing is stored.
func TestCommonTemplatesAndValidator(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	tmpl := &unstructured.Unstructured{}
	tmpl.SetAPIVersion("template.openshift.io/v1")
	tmpl.SetKind("Template")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "openshift", Name: "tekvirt-guest-server-tiny"}, tmpl); err != nil {
		t.Fatalf("the common template: %v", err)
	}
	if tmpl.GetLabels()["template.kubevirt.io/type"] != "base" || tmpl.GetLabels()["os.template.kubevirt.io/tekvirt-guest1"] != "true" {
		t.Errorf("common template labels %v", tmpl.GetLabels())
	}

	vm := func(name, memory, template string) *v1.VirtualMachine {
		vm := framework.GuestVM(ns, name, framework.GuestImage, v1.RunStrategyHalted)
		vm.Labels = map[string]string{templatevalidation.TemplateLabel: template, templatevalidation.TemplateNamespaceLabel: "openshift"}
		vm.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
		vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: ptr(resource.MustParse(memory))}
		return vm
	}
	dry := client.DryRunAll
	err := c.Create(ctx, vm("too-small", "64Mi", "tekvirt-guest-server-tiny"), dry)
	if err == nil || !strings.Contains(err.Error(), "needs at least 128Mi") || !strings.Contains(err.Error(), "rule minimal-required-memory") {
		t.Errorf("a VM under the template's memory minimum: %v", err)
	}
	if err := c.Create(ctx, vm("fits", "256Mi", "tekvirt-guest-server-tiny"), dry); err != nil {
		t.Errorf("a VM within the template's rules: %v", err)
	}
	if err := c.Create(ctx, vm("orphan", "64Mi", "no-such-template"), dry); err != nil {
		t.Errorf("a VM whose template does not exist: %v (want admitted with a warning)", err)
	}
	list := &v1.VirtualMachineList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("dry runs stored VMs: %d %v", len(list.Items), err)
	}
}

// TestAttackTemplateRulesOfAnotherNamespace: a tenant labels its VM with a
// template in a namespace it may not read; the validator does not read it
// for them (a warning says so, nothing of its rules leaks), so the VM is
// admitted without the other namespace's rule and its message.
func TestAttackTemplateRulesOfAnotherNamespace(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	mine, theirs := f.Namespace(t), f.Namespace(t)
	ctx := context.Background()
	secret := userTemplate(t, theirs)
	tmpl := &templatev1.Template{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(secret.Object, tmpl); err != nil {
		t.Fatal(err)
	}
	tmpl.Annotations = map[string]string{templatevalidation.TemplateAnnotation: `[{"name":"secret-rule","path":"jsonpath::.spec.domain.memory.guest","rule":"integer","message":"the other tenant's secret rule","min":999999999999}]`}
	if err := c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	tenant := userClient(t, f, mine, "e2e-tenant")
	vm := framework.GuestVM(mine, "borrower", framework.GuestImage, v1.RunStrategyHalted)
	vm.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
	vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: ptr(resource.MustParse("256Mi"))}
	vm.Labels = map[string]string{templatevalidation.TemplateLabel: tmpl.Name, templatevalidation.TemplateNamespaceLabel: theirs}
	if err := tenant.Create(ctx, vm, client.DryRunAll); err != nil {
		t.Errorf("a VM naming another namespace's template: %v (want admitted with a warning, the template unread)", err)
	}
	// The same VM by someone who may read the template meets its rule.
	vm.ResourceVersion = ""
	if err := c.Create(ctx, vm, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "the other tenant's secret rule") {
		t.Errorf("the template's reader: %v, want its rule applied", err)
	}
}
