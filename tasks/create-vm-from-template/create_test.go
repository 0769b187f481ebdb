package vmfromtemplate

import (
	"context"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/vmcreate"
)

func template() *templatev1.Template {
	vm := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
	  "metadata":{"name":"${NAME}","namespace":"elsewhere"},
	  "spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"memory":{"guest":"${MEMORY}"},"devices":{}}}}}}`
	return &templatev1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openshift", Name: "guest-tiny", Labels: map[string]string{vmtemplate.OSLabelPrefix + "guest1": "true"}},
		Objects:    []runtime.RawExtension{{Raw: []byte(vm)}},
		Parameters: []templatev1.Parameter{{Name: "NAME", Required: true}, {Name: "MEMORY", Value: "128Mi"}},
	}
}

func TestRun(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(template()).Build()
	ctx := context.Background()
	var started []string
	start := func(_ context.Context, ns, name string) error { started = append(started, ns+"/"+name); return nil }
	p := Params{
		TemplateName: "guest-tiny", TemplateNamespace: "openshift", TemplateParams: []string{"NAME:vm1", "MEMORY:256Mi"},
		Options: vmcreate.Options{DefaultNamespace: "tenant", StartVM: "true", SetOwnerReference: "false"},
	}
	res, err := Run(ctx, c, start, p)
	if err != nil || res.Name != "vm1" || res.Namespace != "tenant" || !res.Started {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "vm1"}, vm); err != nil {
		t.Fatal(err)
	}
	if vm.Labels[vmtemplate.TemplateLabel] != "guest-tiny" || vm.Labels[vmtemplate.TemplateNamespaceLabel] != "openshift" || vm.Labels[vmtemplate.OSLabelPrefix+"guest1"] != "true" {
		t.Errorf("labels %v", vm.Labels)
	}
	if got := vm.Spec.Template.Spec.Domain.Memory.Guest.String(); got != "256Mi" {
		t.Errorf("memory %s, want the templateParams value 256Mi", got)
	}
	if len(started) != 1 || started[0] != "tenant/vm1" {
		t.Errorf("started %v", started)
	}
	if res, err := Run(ctx, c, start, p); err != nil || !res.Existed {
		t.Errorf("rerun = %+v, %v; want the earlier VM found", res, err)
	}

	for name, tc := range map[string]struct {
		p    Params
		want string
	}{
		"no template name":  {Params{}, "param templateName is empty"},
		"missing template":  {Params{TemplateName: "nope", Options: vmcreate.Options{DefaultNamespace: "tenant"}}, "reading template tenant/nope"},
		"bad entry":         {Params{TemplateName: "guest-tiny", TemplateNamespace: "openshift", TemplateParams: []string{"NAME"}}, `"NAME" is not KEY:VALUE`},
		"required missing":  {Params{TemplateName: "guest-tiny", TemplateNamespace: "openshift"}, "required parameter NAME has no value"},
		"unknown parameter": {Params{TemplateName: "guest-tiny", TemplateNamespace: "openshift", TemplateParams: []string{"NAME:x", "CPU:2"}}, "has no parameter CPU"},
	} {
		tc.p.SetOwnerReference = "false"
		if _, err := Run(ctx, c, start, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	list := &v1.VirtualMachineList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) != 1 {
		t.Errorf("VMs after the bad runs: %d, %v; want only vm1", len(list.Items), err)
	}
}
