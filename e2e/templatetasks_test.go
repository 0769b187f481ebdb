package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	templatev1 "github.com/openshift/api/template/v1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func templateTaskRun(templateNS, templateName, vmNS string, extra map[string]any, params ...string) *pipelinev1.TaskRun {
	p := map[string]any{"templateName": templateName, "templateNamespace": templateNS, "vmNamespace": vmNS, "templateParams": params}
	for k, v := range extra {
		p[k] = v
	}
	return framework.CatalogTaskRun("create-vm-from-template", p)
}

// TestCreateVMFromTemplateTask: create-vm-from-template makes a VM from
// the common template (labelled with it, booting a clone of the golden
// DataSource) and from a tenant's own template, started through the start
// subresource; a value that breaks the template's rule, an unknown
// parameter and a missing template fail the TaskRun naming the cause, and
// create nothing.
func TestCreateVMFromTemplateTask(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
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

	framework.NewTaskRunRunner(t, f, templateTaskRun(ns, "guest-from-container-disk", ns, map[string]any{"startVM": "true"}, "NAME:own", "MEMORY:192Mi")).
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

// TestCopyAndModifyTemplateTasks: copy-template makes the common template
// a tenant's own; modify-vm-template resizes the copy and changes its root
// disk's bus, and a VM made from it has them; a misspelt disk field fails
// naming it and leaves the template as it was; a size under the copied
// rule is written (templates are not validated) but the VM made from it is
// refused with the rule's message; deleteTemplate removes the copy.
func TestCopyAndModifyTemplateTasks(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	for _, task := range []string{"copy-template", "modify-vm-template", "create-vm-from-template"} {
		f.BindTaskRole(t, ns, task)
	}
	r := framework.NewTaskRunRunner(t, f, framework.CatalogTaskRun("copy-template", map[string]any{
		"sourceTemplateName": "tekvirt-guest-server-tiny", "sourceTemplateNamespace": "openshift",
		"targetTemplateName": "my-guest", "targetTemplateNamespace": ns,
	})).CreateTaskRun().ExpectSuccess()
	if res := r.Results(); res["name"] != "my-guest" || res["namespace"] != ns {
		t.Errorf("copy results %v", res)
	}
	tmpl := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-guest"}, tmpl); err != nil {
		t.Fatal(err)
	}
	if tmpl.Labels[vmtemplate.TypeLabel] != "vm" || tmpl.Labels["app.kubernetes.io/managed-by"] != "" || tmpl.Labels[vmtemplate.OSLabelPrefix+"tekvirt-guest1"] != "" {
		t.Errorf("the copy's labels %v", tmpl.Labels)
	}

	modify := func(params map[string]any) *pipelinev1.TaskRun {
		params["templateName"], params["templateNamespace"] = "my-guest", ns
		return framework.CatalogTaskRun("modify-vm-template", params)
	}
	framework.NewTaskRunRunner(t, f, modify(map[string]any{
		"cpuCores": "2", "memory": "192Mi", "templateLabels": []string{"team: blue"},
		"disks": []string{`{"name": "rootdisk", "disk": {"bus": "sata"}}`},
	})).CreateTaskRun().ExpectSuccess().ExpectLogs("template " + ns + "/my-guest modified")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-guest"}, tmpl); err != nil {
		t.Fatal(err)
	}
	before := tmpl.ResourceVersion
	framework.NewTaskRunRunner(t, f, modify(map[string]any{"disks": []string{`{"name": "rootdisk", "bus": "sata"}`}})).
		CreateTaskRun().ExpectFailure(`disks\[0\] is not a valid v1.Disk: json: unknown field "bus"`)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-guest"}, tmpl); err != nil || tmpl.ResourceVersion != before {
		t.Errorf("a refused modification changed the template: %v (resourceVersion %s, was %s)", err, tmpl.ResourceVersion, before)
	}

	framework.NewTaskRunRunner(t, f, templateTaskRun(ns, "my-guest", ns, nil, "NAME:resized")).CreateTaskRun().ExpectSuccess()
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "resized"}, vm); err != nil {
		t.Fatal(err)
	}
	dom := vm.Spec.Template.Spec.Domain
	if dom.CPU.Cores != 2 || dom.Memory.Guest.String() != "192Mi" || dom.Devices.Disks[0].Disk.Bus != v1.DiskBusSATA || vm.Labels[vmtemplate.TemplateLabel] != "my-guest" {
		t.Errorf("VM from the modified copy: cores %d memory %s bus %s labels %v", dom.CPU.Cores, dom.Memory.Guest, dom.Devices.Disks[0].Disk.Bus, vm.Labels)
	}

	framework.NewTaskRunRunner(t, f, modify(map[string]any{"memory": "64Mi"})).CreateTaskRun().ExpectSuccess()
	framework.NewTaskRunRunner(t, f, templateTaskRun(ns, "my-guest", ns, nil, "NAME:too-small")).
		CreateTaskRun().ExpectFailure("needs at least 128Mi")

	framework.NewTaskRunRunner(t, f, modify(map[string]any{"deleteTemplate": "true"})).CreateTaskRun().ExpectSuccess().
		ExpectLogs("template " + ns + "/my-guest deleted")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-guest"}, tmpl); !apierrors.IsNotFound(err) {
		t.Errorf("template after deleteTemplate: %v", err)
	}
}
