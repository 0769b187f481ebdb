package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	templatev1 "github.com/openshift/api/template/v1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// userTemplate is a template a tenant writes: the test guest from its
// container disk, memory a parameter, at least 128Mi by its rule.
func userTemplate(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	vm := framework.GuestVM("", "placeholder-name", framework.GuestImage, v1.RunStrategyHalted)
	vm.TypeMeta = metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"}
	vm.Annotations = map[string]string{vmtemplate.VMValidationsAnnotation: `[{"name":"minimal-memory","path":"jsonpath::.spec.domain.memory.guest",
	  "rule":"integer","message":"This guest needs at least 128Mi.","min":134217728}]`}
	vm.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
	vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: ptr(resource.MustParse("777Mi"))}
	raw, err := json.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.NewReplacer(`"placeholder-name"`, `"${NAME}"`, `"777Mi"`, `"${MEMORY}"`).Replace(string(raw)))
	tmpl := &templatev1.Template{
		TypeMeta:   metav1.TypeMeta{APIVersion: "template.openshift.io/v1", Kind: "Template"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guest-from-container-disk", Labels: map[string]string{vmtemplate.OSLabelPrefix + "tekvirt-guest1": "true"}},
		Objects:    []runtime.RawExtension{{Raw: raw}},
		Parameters: []templatev1.Parameter{{Name: "NAME", Required: true}, {Name: "MEMORY", Value: "256Mi"}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func templateTaskRun(templateNS, templateName, vmNS string, extra map[string]string, params ...string) *pipelinev1.TaskRun {
	tr := &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "create-vm-from-template-", Namespace: framework.CatalogNamespace},
		Spec: pipelinev1.TaskRunSpec{
			TaskRef:            &pipelinev1.TaskRef{Name: "create-vm-from-template"},
			ServiceAccountName: "create-vm-from-template-task",
			Params: pipelinev1.Params{
				{Name: "templateName", Value: *pipelinev1.NewStructuredValues(templateName)},
				{Name: "templateNamespace", Value: *pipelinev1.NewStructuredValues(templateNS)},
				{Name: "vmNamespace", Value: *pipelinev1.NewStructuredValues(vmNS)},
				{Name: "templateParams", Value: *pipelinev1.NewStructuredValues(params[0], params[1:]...)},
			},
		},
	}
	for k, v := range extra {
		tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: k, Value: *pipelinev1.NewStructuredValues(v)})
	}
	return tr
}

// TestCreateVMFromTemplateTask: create-vm-from-template makes a VM from
// the common template (labelled with it, booting a clone of the golden
// DataSource) and from a tenant's own template, started through the start
// subresource; a value that breaks the template's rule, an unknown
// parameter and a missing template fail the TaskRun naming the cause, and
// create nothing.
func TestCreateVMFromTemplateTask(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	f.BindTaskRole(t, ns, "create-vm-from-template")
	if err := c.Create(ctx, userTemplate(t, ns)); err != nil {
		t.Fatal(err)
	}

	r := framework.NewTaskRunRunner(t, f, templateTaskRun("openshift", "tekvirt-guest-server-tiny", ns, nil, "NAME:from-common")).
		CreateTaskRun().ExpectSuccess().ExpectLogs(`template tekvirt-guest-server-tiny processed in`, "VirtualMachine "+ns+"/from-common created")
	if res := r.Results(); res["name"] != "from-common" || res["namespace"] != ns {
		t.Errorf("results %v", res)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "from-common"}, vm); err != nil {
		t.Fatal(err)
	}
	if vm.Labels[vmtemplate.TemplateLabel] != "tekvirt-guest-server-tiny" || vm.Labels[vmtemplate.TemplateNamespaceLabel] != "openshift" ||
		vm.Labels["os.template.kubevirt.io/tekvirt-guest1"] != "true" || vm.Spec.Template.ObjectMeta.Labels[vmtemplate.VMNameLabel] != "from-common" {
		t.Errorf("VM labels %v, VMI template labels %v", vm.Labels, vm.Spec.Template.ObjectMeta.Labels)
	}
	if src := vm.Spec.DataVolumeTemplates[0].Spec.SourceRef; src == nil || src.Name != "guest" || *src.Namespace != "tekvirt-os-images" {
		t.Errorf("boot source %+v, want the golden DataSource", src)
	}
	if rs, _ := vm.RunStrategy(); rs != v1.RunStrategyHalted {
		t.Errorf("run strategy %s, want the template's Halted (startVM not given)", rs)
	}

	framework.NewTaskRunRunner(t, f, templateTaskRun(ns, "guest-from-container-disk", ns, map[string]string{"startVM": "true"}, "NAME:own", "MEMORY:192Mi")).
		CreateTaskRun().ExpectSuccess().ExpectLogs("VirtualMachine " + ns + "/own started")
	framework.WaitVMI(t, c, ns, "own", 3*time.Minute, "created by the start", func(vmi *v1.VirtualMachineInstance) error { return nil })
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own"}, vm); err != nil {
		t.Fatal(err)
	}
	if rs, _ := vm.RunStrategy(); rs != v1.RunStrategyAlways || vm.Spec.Template.Spec.Domain.Memory.Guest.String() != "192Mi" {
		t.Errorf("started VM: run strategy %s memory %s", rs, vm.Spec.Template.Spec.Domain.Memory.Guest)
	}
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		tr   *pipelinev1.TaskRun
		want string
	}{
		"rule broken":       {templateTaskRun(ns, "guest-from-container-disk", ns, nil, "NAME:too-small", "MEMORY:64Mi"), "This guest needs at least 128Mi"},
		"unknown parameter": {templateTaskRun(ns, "guest-from-container-disk", ns, nil, "NAME:colour", "COLOUR:blue"), "has no parameter COLOUR"},
		"missing template":  {templateTaskRun(ns, "no-such-template", ns, nil, "NAME:none"), `reading template ` + ns + `/no-such-template: .*not found`},
	} {
		t.Run(name, func(t *testing.T) {
			framework.NewTaskRunRunner(t, f, tc.tr).CreateTaskRun().ExpectFailure(tc.want)
		})
	}
	list := &v1.VirtualMachineList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, vm := range list.Items {
		if vm.Name != "from-common" && vm.DeletionTimestamp == nil {
			t.Errorf("VM %s left by a failed run", vm.Name)
		}
	}
}
