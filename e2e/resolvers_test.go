package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// resolvedTasks are the catalog tasks a user's pipeline reaches through
// Tekton's resolvers in TestCatalogThroughResolvers.
var resolvedTasks = []string{"import-disk", "create-vm-from-manifest", "execute-in-vm", "cleanup-vm"}

func str(s string) pipelinev1.ParamValue { return *pipelinev1.NewStructuredValues(s) }

// clusterRef is catalog task name through the cluster resolver.
func clusterRef(ns, name string) *pipelinev1.TaskRef {
	return &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "cluster", Params: pipelinev1.Params{
		{Name: "kind", Value: str("task")}, {Name: "name", Value: str(name)}, {Name: "namespace", Value: str(ns)}}}}
}

// httpRef is the task at url through the http resolver.
func httpRef(url string) *pipelinev1.TaskRef {
	return &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "http", Params: pipelinev1.Params{{Name: "url", Value: str(url)}}}}
}

// TestCatalogThroughResolvers: in a namespace of their own, a user applies
// the rendered catalog's RBAC files of four tasks (`kubectl apply -n NS -f
// <task>-rbac.yaml`, each alone) and execute-in-vm's Task file, and runs a
// pipeline that imports the test guest into a claim, boots a VM from it,
// executes a command in it and deletes it: import-disk through the cluster
// resolver (the catalog namespace), create-vm-from-manifest and cleanup-vm
// through the http resolver (the rendered files, served), execute-in-vm by
// name; each task runs as its own ServiceAccount. The TaskRuns record where
// each came from. The cluster resolver refuses a namespace other than the
// catalog's (it reads with its own rights, so another tenant's Tasks stay
// theirs), and an http reference that does not exist fails naming it;
// neither runs anything.
func TestCatalogThroughResolvers(t *testing.T) {
	t.Parallel() // mostly waiting on a pipeline: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	ns, other := f.Namespace(t), f.Namespace(t)
	installed, err := f.Tekton.TektonV1().Tasks(framework.CatalogNamespace).Get(ctx, "import-disk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const version = "0.1"
	if err := catalog.Render(dir, catalog.Publication{StepImage: installed.Spec.Steps[0].Image, Version: version, Provider: "tekvirt",
		HubRepository: "tekvirt", Maintainers: []catalog.Maintainer{{Name: "e2e", Email: "e2e@tekvirt.test"}}}); err != nil {
		t.Fatal(err)
	}
	file := func(task, suffix string) string { return filepath.Join(dir, "task", task, version, task+suffix) }
	files := []string{file("execute-in-vm", ".yaml")}
	for _, name := range resolvedTasks {
		files = append(files, file(name, "-rbac.yaml"))
	}
	for _, file := range files {
		if out, err := run(f, f.Bin("kubectl"), "apply", "-n", ns, "-f", file); err != nil {
			t.Fatalf("kubectl apply -n %s -f %s: %v\n%s", ns, file, err, out)
		}
	}
	tasks := serveDir(t, f, dir)
	guest := serveGuest(t, f)
	disk := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "disk"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}}}}
	if err := c.Create(ctx, disk); err != nil {
		t.Fatal(err)
	}
	theirs := &pipelinev1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theirs"}, Spec: pipelinev1.TaskSpec{
		Steps: []pipelinev1.Step{{Name: "s", Image: "busybox", Script: "echo the other tenant's"}}}}
	if _, err := f.Tekton.TektonV1().Tasks(other).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vm := framework.GuestVM(ns, "resolved", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes[0].VolumeSource = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: disk.Name}}}
	vm.TypeMeta = metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"}
	manifest, err := yaml.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	url := func(task string) string { return tasks + "/task/" + task + "/" + version + "/" + task + ".yaml" }
	refs := map[string]*pipelinev1.TaskRef{
		"import-disk":             clusterRef(framework.CatalogNamespace, "import-disk"),
		"create-vm-from-manifest": httpRef(url("create-vm-from-manifest")),
		"execute-in-vm":           {Name: "execute-in-vm"},
		"cleanup-vm":              httpRef(url("cleanup-vm")),
	}
	vmName := pipelinev1.Param{Name: "vmName", Value: str("$(tasks.create.results.name)")}
	spec := &pipelinev1.PipelineSpec{
		Workspaces: []pipelinev1.PipelineWorkspaceDeclaration{{Name: "disk"}},
		Tasks: []pipelinev1.PipelineTask{
			{Name: "import", TaskRef: refs["import-disk"], Workspaces: []pipelinev1.WorkspacePipelineTaskBinding{{Name: "data", Workspace: "disk"}},
				Params: pipelinev1.Params{{Name: "url", Value: str(guest + "/guest.qcow2")}, {Name: "capacity", Value: str("256Mi")}}},
			{Name: "create", RunAfter: []string{"import"}, TaskRef: refs["create-vm-from-manifest"],
				Params: pipelinev1.Params{{Name: "manifest", Value: str(string(manifest))}}},
			{Name: "execute", RunAfter: []string{"create"}, TaskRef: refs["execute-in-vm"],
				Params: pipelinev1.Params{vmName, {Name: "script", Value: str("echo resolved-`hostname`")}}},
		},
		Finally: []pipelinev1.PipelineTask{{Name: "cleanup", TaskRef: refs["cleanup-vm"],
			Params: pipelinev1.Params{vmName, {Name: "delete", Value: str("true")}, {Name: "timeout", Value: str("5m")}}}},
	}
	pr := &pipelinev1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "resolved-"}, Spec: pipelinev1.PipelineRunSpec{
		PipelineSpec: spec,
		TaskRunSpecs: []pipelinev1.PipelineTaskRunSpec{{PipelineTaskName: "import", ServiceAccountName: "import-disk-task"},
			{PipelineTaskName: "create", ServiceAccountName: "create-vm-from-manifest-task"},
			{PipelineTaskName: "execute", ServiceAccountName: "execute-in-vm-task"}, {PipelineTaskName: "cleanup", ServiceAccountName: "cleanup-vm-task"}},
		Workspaces: []pipelinev1.WorkspaceBinding{{Name: "disk", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: disk.Name}}},
	}}
	start := time.Now()
	runPipelineSample(t, f, pr, 8*time.Minute)
	t.Logf("the pipeline through the cluster and http resolvers and an applied Task: %s", time.Since(start).Round(100*time.Millisecond))

	runs, err := f.Tekton.TektonV1().TaskRuns(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSource := map[string]string{"import": "import-disk", "create": url("create-vm-from-manifest"), "execute": "", "cleanup": url("cleanup-vm")}
	for _, tr := range runs.Items {
		task := tr.Labels["tekton.dev/pipelineTask"]
		var uri string
		if p := tr.Status.Provenance; p != nil && p.RefSource != nil {
			uri = p.RefSource.URI
		}
		if want, ok := wantSource[task]; !ok || !strings.Contains(uri, want) || (want == "") != (uri == "") {
			t.Errorf("TaskRun %s (task %s) came from %q, want %q", tr.Name, task, uri, want)
		}
		delete(wantSource, task)
		if task == "execute" {
			logs := framework.NewTaskRunRunner(t, f, &tr).Logs()
			if !strings.Contains(logs, "resolved-resolved") {
				t.Errorf("execute-in-vm's output lacks the guest's hostname:\n%s", logs)
			}
		}
	}
	if len(wantSource) > 0 {
		t.Errorf("no TaskRuns of %v", wantSource)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &v1.VirtualMachine{}); err == nil {
		t.Errorf("cleanup-vm left VM %s/%s", vm.Namespace, vm.Name)
	}

	for _, bad := range []struct {
		what string
		ref  *pipelinev1.TaskRef
		want string
	}{
		{"another tenant's Task through the cluster resolver", clusterRef(other, "theirs"), other},
		{"an http reference that does not exist", httpRef(url("no-such-task")), "no-such-task.yaml"},
	} {
		pr := &pipelinev1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "refused-"}, Spec: pipelinev1.PipelineRunSpec{
			PipelineSpec:    &pipelinev1.PipelineSpec{Tasks: []pipelinev1.PipelineTask{{Name: "only", TaskRef: bad.ref}}},
			TaskRunTemplate: pipelinev1.PipelineTaskRunTemplate{ServiceAccountName: "import-disk-task"},
		}}
		msg := expectPipelineFailure(t, f, pr, 2*time.Minute)
		t.Logf("%s: %s", bad.what, msg)
		if !strings.Contains(msg, bad.want) {
			t.Errorf("%s: the PipelineRun failed with %q, want it naming %q", bad.what, msg, bad.want)
		}
		trs, err := f.Tekton.TektonV1().TaskRuns(ns).List(ctx, metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + pr.Name})
		if err != nil || len(trs.Items) != 0 {
			t.Errorf("%s: TaskRuns %d (%v), want none", bad.what, len(trs.Items), err)
		}
	}
}
