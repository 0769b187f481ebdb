package bench

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	templatev1 "github.com/openshift/api/template/v1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/tasks/templates"
)

var processedIn = regexp.MustCompile(`processed in (\S+)`)

// TestCreateVMFromTemplateVsManifest compares create -> Succeeded of
// create-vm-from-template (the common template) with create-vm-from-manifest
// given the VM that template makes, interleaved, median of 5 each; and
// what processing the template took in the step (the issue allows 0.5 s).
func TestCreateVMFromTemplateVsManifest(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	for _, task := range []string{"create-vm-from-template", "create-vm-from-manifest"} {
		f.BindTaskRole(t, ns, task)
	}
	common := &templatev1.Template{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "openshift", Name: "tekvirt-guest-server-tiny"}, common); err != nil {
		t.Fatal(err)
	}
	taskRun := func(task string, params map[string]pipelinev1.ParamValue) *pipelinev1.TaskRun {
		tr := &pipelinev1.TaskRun{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + task + "-", Namespace: framework.CatalogNamespace},
			Spec:       pipelinev1.TaskRunSpec{TaskRef: &pipelinev1.TaskRef{Name: task}, ServiceAccountName: task + "-task"},
		}
		for k, v := range params {
			tr.Spec.Params = append(tr.Spec.Params, pipelinev1.Param{Name: k, Value: v})
		}
		return tr
	}
	var fromTemplate, fromManifest, processing []time.Duration
	for i := range runs {
		name := fmt.Sprintf("from-template-%d", i)
		r := framework.NewTaskRunRunner(t, f, taskRun("create-vm-from-template", map[string]pipelinev1.ParamValue{
			"templateName": *pipelinev1.NewStructuredValues("tekvirt-guest-server-tiny"), "templateNamespace": *pipelinev1.NewStructuredValues("openshift"),
			"vmNamespace":    *pipelinev1.NewStructuredValues(ns),
			"templateParams": {Type: pipelinev1.ParamTypeArray, ArrayVal: []string{"NAME:" + name}},
		})).CreateTaskRun().ExpectSuccess()
		fromTemplate = append(fromTemplate, r.Elapsed)
		m := processedIn.FindStringSubmatch(r.Logs())
		if m == nil {
			t.Fatalf("no processing time in the log:\n%s", r.Logs())
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		processing = append(processing, d)

		vm, err := templates.VirtualMachine(common, map[string]string{"NAME": fmt.Sprintf("from-manifest-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		templates.MarkOrigin(vm, common)
		manifest, err := yaml.Marshal(vm)
		if err != nil {
			t.Fatal(err)
		}
		r = framework.NewTaskRunRunner(t, f, taskRun("create-vm-from-manifest", map[string]pipelinev1.ParamValue{
			"manifest": *pipelinev1.NewStructuredValues(string(manifest)), "namespace": *pipelinev1.NewStructuredValues(ns),
		})).CreateTaskRun().ExpectSuccess()
		fromManifest = append(fromManifest, r.Elapsed)
	}
	mt, mm := median(fromTemplate), median(fromManifest)
	t.Logf("create-vm-from-template TaskRun create->Succeeded: median %s of %v", mt, fromTemplate)
	t.Logf("create-vm-from-manifest TaskRun (the same VM) create->Succeeded: median %s of %v", mm, fromManifest)
	t.Logf("ratio template / manifest: %.2f; template processing in the step: median %s of %v (limit 0.5s)", float64(mt)/float64(mm), median(processing), processing)
	if p := median(processing); p > 500*time.Millisecond {
		t.Errorf("processing the template took %s, more than 0.5 s", p)
	}
}
