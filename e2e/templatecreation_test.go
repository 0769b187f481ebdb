package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	templatev1 "github.com/openshift/api/template/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

var pipelineRunStarted = regexp.MustCompile(`PipelineRun started: (\S+)`)

// TestTemplateCreationPipeline: template-creation (tkn, as a user runs it)
// imports the guest, customises its disk in a VM, publishes it, copies the
// common template and points the copy at it; the VM the new template makes
// boots the customised disk (the check reads what the customisation
// wrote). No VM is left. The log gives the run's wall time and each
// task's share of it.
func TestTemplateCreationPipeline(t *testing.T) {
	t.Parallel() // long and mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	ns := framework.CatalogNamespace
	name := "e2e-" + rand.String(5)
	t.Cleanup(func() { cleanTemplateCreation(c, ns, name) })
	// docs/templates.md's command, given a boot source of its own (the
	// docs' default is make demo's golden image) and names of its own, so
	// that it runs beside other scenarios.
	e := docexample.Find(t, "templates-pipeline")
	e.Body = strings.TrimSpace(e.Body) + " -p url=" + serveGuest(t, f) + "/guest.qcow2.xz -p templateName=" + name +
		" -p dataSourceName=" + name + " -p size=128Mi --exit-with-pipelinerun-error\n"
	start := time.Now()
	out, err := runExample(t, f, e, t.TempDir())
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("template-creation pipeline: %v\n%s", err, out)
	}
	for _, want := range []string{"Succeeded 100.0%", "boot disk customized", "DataSource " + ns + "/" + name + ": Ready=True",
		"template " + ns + "/" + name + " created", "template " + ns + "/" + name + " modified", "customized by template-creation"} {
		if !strings.Contains(out, want) {
			t.Errorf("pipeline output lacks %q:\n%s", want, out)
		}
	}
	m := pipelineRunStarted.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no PipelineRun name in:\n%s", out)
	}
	logTaskShares(t, f, ns, m[1], wall)

	tmpl := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tmpl); err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for _, p := range tmpl.Parameters {
		params[p.Name] = p.Value
	}
	if params["DATA_SOURCE_NAME"] != name || params["DATA_SOURCE_NAMESPACE"] != ns || tmpl.Labels["template.kubevirt.io/type"] != "vm" {
		t.Errorf("new template: parameters %v labels %v", params, tmpl.Labels)
	}
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	waitDataSource(t, c, ds, corev1.ConditionTrue)
	var vms v1.VirtualMachineList
	if err := c.List(ctx, &vms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms.Items {
		if strings.HasPrefix(vm.Name, m[1]) && vm.DeletionTimestamp == nil {
			t.Errorf("VM %s left behind", vm.Name)
		}
	}
}

// logTaskShares logs each task's share of a PipelineRun's wall time.
func logTaskShares(t *testing.T, f *framework.Framework, ns, run string, wall time.Duration) {
	t.Helper()
	trs, err := f.Tekton.TektonV1().TaskRuns(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + run})
	if err != nil {
		t.Fatal(err)
	}
	type share struct {
		task string
		d    time.Duration
	}
	var shares []share
	for _, tr := range trs.Items {
		if tr.Status.StartTime == nil || tr.Status.CompletionTime == nil {
			continue
		}
		shares = append(shares, share{tr.Labels["tekton.dev/pipelineTask"], tr.Status.CompletionTime.Sub(tr.Status.StartTime.Time)})
	}
	sort.Slice(shares, func(i, j int) bool { return shares[i].d > shares[j].d })
	var b strings.Builder
	for _, s := range shares {
		fmt.Fprintf(&b, " %s %s (%.0f%%);", s.task, s.d.Round(100*time.Millisecond), 100*s.d.Seconds()/wall.Seconds())
	}
	t.Logf("%s: wall %s (tkn start to end), tasks:%s", run, wall.Round(100*time.Millisecond), b.String())
}

// cleanTemplateCreation deletes what a template-creation run named name
// made in ns.
func cleanTemplateCreation(c client.Client, ns, name string) {
	ctx := context.Background()
	_ = c.Delete(ctx, &templatev1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	_ = c.Delete(ctx, &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	_ = c.DeleteAllOf(ctx, &cdiv1.DataVolume{}, client.InNamespace(ns), client.MatchingLabels{"tekvirt.io/template-disk": name})
}
