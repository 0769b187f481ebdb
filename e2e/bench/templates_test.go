package bench

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	templatev1 "github.com/openshift/api/template/v1"
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
	var fromTemplate, fromManifest, processing []time.Duration
	for i := range runs {
		name := fmt.Sprintf("from-template-%d", i)
		r := framework.NewTaskRunRunner(t, f, framework.CatalogTaskRun("create-vm-from-template", map[string]any{
			"templateName": "tekvirt-guest-server-tiny", "templateNamespace": "openshift", "vmNamespace": ns, "templateParams": []string{"NAME:" + name},
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
		r = framework.NewTaskRunRunner(t, f, framework.CatalogTaskRun("create-vm-from-manifest", map[string]any{
			"manifest": string(manifest), "namespace": ns,
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
