package e2e

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// resolvedTasks are the catalog tasks a user's pipeline reaches through
// Tekton's resolvers in TestCatalogThroughResolvers and
// TestCatalogThroughBundles.
var resolvedTasks = []string{"import-disk", "create-vm-from-manifest", "execute-in-vm", "cleanup-vm"}

// resolvedVersion is the version the resolver scenarios render the catalog as.
const resolvedVersion = "0.1"

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

// bundleRef is task name in the bundle image ref through the bundles resolver.
func bundleRef(ref, name string) *pipelinev1.TaskRef {
	return &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "bundles", Params: pipelinev1.Params{
		{Name: "bundle", Value: str(ref)}, {Name: "name", Value: str(name)}, {Name: "kind", Value: str("task")}}}}
}

// resolverTenant is a user's namespace (enforcing Pod Security
// "restricted") set up to run the catalog's tasks from outside the catalog
// namespace: the rendered catalog (in dir), the RBAC files of resolvedTasks
// applied there, each alone, a claim for the disk and the manifest of a VM
// booting from it.
type resolverTenant struct {
	ns, dir  string
	vm       *v1.VirtualMachine
	manifest string
	guest    string // base URL of the test guest
}

func newResolverTenant(t *testing.T, f *framework.Framework, vmName string) *resolverTenant {
	t.Helper()
	ctx := context.Background()
	r := &resolverTenant{ns: f.Namespace(t), dir: renderCatalog(t, f), guest: serveGuest(t, f)}
	// As a careful admin sets up tenants; the catalog's Pods, the VM's
	// launcher Pod included, run there as they do anywhere.
	podSecurity(t, f, r.ns, "restricted")
	applyTaskRBAC(t, f, r.ns, r.dir, resolvedTasks...)
	disk := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "disk"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}}}}
	if err := f.VMClient(t).Create(ctx, disk); err != nil {
		t.Fatal(err)
	}
	r.vm = framework.GuestVM(r.ns, vmName, framework.GuestImage, v1.RunStrategyAlways)
	r.vm.Spec.Template.Spec.Volumes[0].VolumeSource = v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: disk.Name}}}
	r.vm.TypeMeta = metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"}
	manifest, err := yaml.Marshal(r.vm)
	if err != nil {
		t.Fatal(err)
	}
	r.manifest = string(manifest)
	return r
}

// renderCatalog renders the catalog, with the step image installed, into a
// folder of the test and returns it.
func renderCatalog(t *testing.T, f *framework.Framework) string {
	t.Helper()
	installed, err := f.Tekton.TektonV1().Tasks(framework.CatalogNamespace).Get(context.Background(), "import-disk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := catalog.Render(dir, resolverPublication(installed.Spec.Steps[0].Image)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// applyTaskRBAC applies the rendered RBAC file of each task into ns, each
// alone, as `kubectl apply -n NS -f <task>-rbac.yaml`.
func applyTaskRBAC(t *testing.T, f *framework.Framework, ns, dir string, tasks ...string) {
	t.Helper()
	for _, name := range tasks {
		file := filepath.Join(dir, "task", name, resolvedVersion, name+"-rbac.yaml")
		if out, err := run(f, f.Bin("kubectl"), "apply", "-n", ns, "-f", file); err != nil {
			t.Fatalf("kubectl apply -n %s -f %s: %v\n%s", ns, file, err, out)
		}
	}
}

func resolverPublication(stepImage string) catalog.Publication {
	return catalog.Publication{StepImage: stepImage, Version: resolvedVersion, Provider: "tekvirt",
		HubRepository: "tekvirt", Maintainers: []catalog.Maintainer{{Name: "e2e", Email: "e2e@tekvirt.test"}}}
}

// file is a rendered file of task: suffix ".yaml" or "-rbac.yaml".
func (r *resolverTenant) file(task, suffix string) string {
	return filepath.Join(r.dir, "task", task, resolvedVersion, task+suffix)
}

// run runs, as each task's own ServiceAccount, a pipeline that imports the
// guest into the claim, creates the VM, executes a command in it and deletes
// it, each catalog task through taskRefs[task], and checks that each TaskRun
// records the source it was resolved from (wantSource[task], a substring of
// its provenance URI; "" for a Task by name) and that the guest answered.
// It returns the TaskRuns.
func (r *resolverTenant) run(t *testing.T, f *framework.Framework, what string, taskRefs map[string]*pipelinev1.TaskRef, wantSource map[string]string) []pipelinev1.TaskRun {
	t.Helper()
	ctx := context.Background()
	vmName := pipelinev1.Param{Name: "vmName", Value: str("$(tasks.create.results.name)")}
	spec := &pipelinev1.PipelineSpec{
		Workspaces: []pipelinev1.PipelineWorkspaceDeclaration{{Name: "disk"}},
		Tasks: []pipelinev1.PipelineTask{
			{Name: "import", TaskRef: taskRefs["import-disk"], Workspaces: []pipelinev1.WorkspacePipelineTaskBinding{{Name: "data", Workspace: "disk"}},
				Params: pipelinev1.Params{{Name: "url", Value: str(r.guest + "/guest.qcow2")}, {Name: "capacity", Value: str("256Mi")}}},
			{Name: "create", RunAfter: []string{"import"}, TaskRef: taskRefs["create-vm-from-manifest"],
				Params: pipelinev1.Params{{Name: "manifest", Value: str(r.manifest)}}},
			{Name: "execute", RunAfter: []string{"create"}, TaskRef: taskRefs["execute-in-vm"],
				Params: pipelinev1.Params{vmName, {Name: "script", Value: str("echo resolved-`hostname`")}}},
		},
		Finally: []pipelinev1.PipelineTask{{Name: "cleanup", TaskRef: taskRefs["cleanup-vm"],
			Params: pipelinev1.Params{vmName, {Name: "delete", Value: str("true")}, {Name: "timeout", Value: str("5m")}}}},
	}
	pr := &pipelinev1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, GenerateName: "resolved-"}, Spec: pipelinev1.PipelineRunSpec{
		PipelineSpec: spec,
		TaskRunSpecs: []pipelinev1.PipelineTaskRunSpec{{PipelineTaskName: "import", ServiceAccountName: "import-disk-task"},
			{PipelineTaskName: "create", ServiceAccountName: "create-vm-from-manifest-task"},
			{PipelineTaskName: "execute", ServiceAccountName: "execute-in-vm-task"}, {PipelineTaskName: "cleanup", ServiceAccountName: "cleanup-vm-task"}},
		Workspaces: []pipelinev1.WorkspaceBinding{{Name: "disk", PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}},
	}}
	start := time.Now()
	runPipelineSample(t, f, pr, 8*time.Minute)
	t.Logf("the pipeline %s: %s", what, time.Since(start).Round(100*time.Millisecond))

	runs, err := f.Tekton.TektonV1().TaskRuns(r.ns).List(ctx, metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + pr.Name})
	if err != nil {
		t.Fatal(err)
	}
	missing := maps.Clone(pipelineTasks)
	for _, tr := range runs.Items {
		task := tr.Labels["tekton.dev/pipelineTask"]
		var uri string
		if p := tr.Status.Provenance; p != nil && p.RefSource != nil {
			uri = p.RefSource.URI
		}
		source, ok := wantSource[pipelineTasks[task]]
		if !ok || !strings.Contains(uri, source) || (source == "") != (uri == "") {
			t.Errorf("TaskRun %s (task %s) came from %q, want %q", tr.Name, task, uri, source)
		}
		delete(missing, task)
		if task == "execute" {
			logs := framework.NewTaskRunRunner(t, f, &tr).Logs()
			if !strings.Contains(logs, "resolved-"+r.vm.Name) {
				t.Errorf("execute-in-vm's output lacks the guest's hostname:\n%s", logs)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("no TaskRuns of %v", missing)
	}
	if err := f.VMClient(t).Get(ctx, client.ObjectKeyFromObject(r.vm), &v1.VirtualMachine{}); err == nil {
		t.Errorf("cleanup-vm left VM %s/%s", r.vm.Namespace, r.vm.Name)
	}
	return runs.Items
}

// pipelineTasks maps the pipeline's task names to the catalog tasks they run.
var pipelineTasks = map[string]string{"import": "import-disk", "create": "create-vm-from-manifest", "execute": "execute-in-vm", "cleanup": "cleanup-vm"}

// refused runs a one-task pipeline with ref and checks that it fails with
// a message holding each of want before any TaskRun exists.
func (r *resolverTenant) refused(t *testing.T, f *framework.Framework, what string, ref *pipelinev1.TaskRef, want ...string) {
	t.Helper()
	pr := &pipelinev1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, GenerateName: "refused-"}, Spec: pipelinev1.PipelineRunSpec{
		PipelineSpec: &pipelinev1.PipelineSpec{Tasks: []pipelinev1.PipelineTask{{Name: "only", TaskRef: ref}}},
	}}
	msg := expectPipelineFailure(t, f, pr, 2*time.Minute)
	t.Logf("%s: %s", what, msg)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: the PipelineRun failed with %q, want it naming %q", what, msg, w)
		}
	}
	trs, err := f.Tekton.TektonV1().TaskRuns(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "tekton.dev/pipelineRun=" + pr.Name})
	if err != nil || len(trs.Items) != 0 {
		t.Errorf("%s: TaskRuns %d (%v), want none", what, len(trs.Items), err)
	}
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
	ctx := context.Background()
	r := newResolverTenant(t, f, "resolved")
	other := f.Namespace(t)
	if out, err := run(f, f.Bin("kubectl"), "apply", "-n", r.ns, "-f", r.file("execute-in-vm", ".yaml")); err != nil {
		t.Fatalf("kubectl apply -n %s -f execute-in-vm.yaml: %v\n%s", r.ns, err, out)
	}
	theirs := &pipelinev1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theirs"}, Spec: pipelinev1.TaskSpec{
		Steps: []pipelinev1.Step{{Name: "s", Image: "busybox", Script: "echo the other tenant's"}}}}
	if _, err := f.Tekton.TektonV1().Tasks(other).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tasks := f.ServeDir(t, r.dir)
	url := func(task string) string {
		return tasks + "/task/" + task + "/" + resolvedVersion + "/" + task + ".yaml"
	}
	// The references as the README and docs/catalog.md write them, the
	// http one pointed at the files served here.
	r.run(t, f, "through the cluster and http resolvers and an applied Task", map[string]*pipelinev1.TaskRef{
		"import-disk":             exampleTaskRef(t, docexample.Find(t, "catalog-cluster-ref")),
		"create-vm-from-manifest": exampleTaskRef(t, docexample.Find(t, "readme-cluster-resolver")),
		"execute-in-vm":           {Name: "execute-in-vm"},
		"cleanup-vm":              exampleTaskRef(t, docexample.Find(t, "catalog-http-ref").With(t, "https://files.example/catalog", tasks)),
	}, map[string]string{"import-disk": "import-disk", "create-vm-from-manifest": "create-vm-from-manifest",
		"execute-in-vm": "", "cleanup-vm": url("cleanup-vm")})

	r.refused(t, f, "another tenant's Task through the cluster resolver", clusterRef(other, "theirs"), other)
	r.refused(t, f, "an http reference that does not exist", httpRef(url("no-such-task")), "no-such-task.yaml")
}

// TestCatalogThroughBundles: the catalog pushed as Tekton bundles
// (catalog.PushBundles, as `make catalog` does) to the testbed's registry
// at its cluster address (make catalog's default REGISTRY, under a path of
// the test's own) runs the same pipeline with every task through the bundles resolver, the
// TaskRuns naming the bundle they came from. A bundle that does not exist
// and a bundle whose layer claims to be a Task but is not a Tekton object
// fail naming the reference; neither runs anything.
func TestCatalogThroughBundles(t *testing.T) {
	t.Parallel() // mostly waiting on a pipeline: see "Parallel" in doc.go
	f := framework.New(t)
	ctx := context.Background()
	r := newResolverTenant(t, f, "bundled")
	host := cluster.RegistryClusterAddr + "/" + r.ns
	installed, err := f.Tekton.TektonV1().Tasks(framework.CatalogNamespace).Get(ctx, "import-disk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := catalog.PushBundles(host, resolverPublication(installed.Spec.Steps[0].Image))
	if err != nil {
		t.Fatal(err)
	}
	taskRefs, repos, digests := map[string]*pipelinev1.TaskRef{}, map[string]string{}, map[string]string{}
	for _, task := range resolvedTasks {
		ref, err := name.NewDigest(refs[task])
		if err != nil {
			t.Fatalf("PushBundles' reference of %s: %v (%v)", task, err, refs)
		}
		taskRefs[task], repos[task], digests[task] = bundleRef(ref.String(), task), ref.Context().String(), ref.DigestStr()
	}
	// import-disk as docs/catalog.md writes it: by its version's tag.
	taskRefs["import-disk"] = exampleTaskRef(t, docexample.Find(t, "catalog-bundles-ref").With(t, "registry.example/tekvirt", host))
	for _, tr := range r.run(t, f, "through the bundles resolver", taskRefs, repos) {
		task := pipelineTasks[tr.Labels["tekton.dev/pipelineTask"]]
		var got string
		if p := tr.Status.Provenance; p != nil && p.RefSource != nil {
			got = "sha256:" + p.RefSource.Digest["sha256"]
		}
		if got != digests[task] {
			t.Errorf("TaskRun %s ran the bundle of %s with digest %s, want %s (pushed)", tr.Name, task, got, digests[task])
		}
	}

	missing := host + "/" + catalog.BundleRepository + "/no-such-task:" + resolvedVersion
	r.refused(t, f, "a bundle that does not exist", bundleRef(missing, "no-such-task"), catalog.BundleRepository+"/no-such-task", "NAME_UNKNOWN")
	notTekton := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Task",
		"metadata": map[string]any{"name": "not-tekton"}, "data": map[string]any{"script": "echo"}}}
	img, err := catalog.Bundle(notTekton)
	if err != nil {
		t.Fatal(err)
	}
	bogus := host + "/" + catalog.BundleRepository + "/not-tekton:" + resolvedVersion
	ref, err := name.ParseReference(bogus)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	r.refused(t, f, "a bundle whose layer is not a Tekton object", bundleRef(bogus, "not-tekton"), "name = not-tekton", "not of a supported type")
}

// gitCloneRef is the file path of repo on the local forge through the git
// resolver's clone mode, authenticated with the token in Secret "forge" of
// the run's namespace.
func gitCloneRef(g *forge, repo, path string) *pipelinev1.TaskRef {
	return &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "git", Params: pipelinev1.Params{
		{Name: "url", Value: str(g.URL + "/" + g.User + "/" + repo + ".git")}, {Name: "revision", Value: str("main")},
		{Name: "pathInRepo", Value: str(path)}, {Name: "gitToken", Value: str("forge")}, {Name: "gitTokenKey", Value: str("token")}}}}
}

// gitRef is the file path of repo on the local forge through the git
// resolver's API mode (the forge's contents API), authenticated likewise.
func gitRef(g *forge, repo, path string) *pipelinev1.TaskRef {
	return &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "git", Params: pipelinev1.Params{
		{Name: "scmType", Value: str("gitea")}, {Name: "serverURL", Value: str(g.URL)},
		{Name: "org", Value: str(g.User)}, {Name: "repo", Value: str(repo)}, {Name: "revision", Value: str("main")},
		{Name: "pathInRepo", Value: str(path)}, {Name: "token", Value: str("forge")}, {Name: "tokenKey", Value: str("token")}}}}
}

// TestCatalogThroughGit: the rendered task files committed to a private
// repository on the local forge run the same pipeline through the git
// resolver, with the user's token in their namespace: import-disk and
// execute-in-vm cloned, create-vm-from-manifest and cleanup-vm through the
// forge's API; the TaskRuns record the commit. A path that does not exist
// in the repository fails naming it. A tenant of another namespace naming
// the same repository and the Secret of the token, or no token, resolves
// nothing.
func TestCatalogThroughGit(t *testing.T) {
	forgeOnly(t)
	f := framework.New(t)
	g := newForge(t, f)
	r := newResolverTenant(t, f, "gitted")
	repo := "catalog-" + r.ns
	g.repo(t, repo)
	files := map[string]string{}
	path := func(task string) string { return "task/" + task + "/" + resolvedVersion + "/" + task + ".yaml" }
	for _, task := range resolvedTasks {
		data, err := os.ReadFile(r.file(task, ".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files[path(task)] = string(data)
	}
	sha := g.commit(t, repo, "main", "", "the rendered catalog", files)
	if _, err := f.Kube.CoreV1().Secrets(r.ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge"},
		StringData: map[string]string{"token": g.Token}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refs, want := map[string]*pipelinev1.TaskRef{}, map[string]string{}
	for _, task := range resolvedTasks {
		refs[task], want[task] = gitRef(g, repo, path(task)), repo
		if task == "execute-in-vm" {
			refs[task] = gitCloneRef(g, repo, path(task))
		}
	}
	// import-disk as docs/catalog.md writes it (clone mode), on this forge.
	refs["import-disk"] = exampleTaskRef(t, docexample.Find(t, "catalog-git-ref").With(t, "http://forge.example/me/catalog.git", g.URL+"/"+g.User+"/"+repo+".git"))
	for _, tr := range r.run(t, f, "through the git resolver", refs, want) {
		if p := tr.Status.Provenance; p == nil || p.RefSource == nil || p.RefSource.Digest["sha1"] != sha {
			t.Errorf("TaskRun %s: provenance %+v, want commit %s", tr.Name, p, sha)
		}
	}
	r.refused(t, f, "a path that does not exist in the repository", gitCloneRef(g, repo, path("no-such-task")), path("no-such-task"))

	// Another tenant names the same private repository: the token Secret
	// is looked up in their own namespace only, and without a token the
	// forge refuses the clone; nothing of it resolves for them.
	other := &resolverTenant{ns: f.Namespace(t)}
	other.refused(t, f, "another tenant naming the Secret of the token", gitCloneRef(g, repo, path("import-disk")), "forge", other.ns)
	anonymous := gitCloneRef(g, repo, path("import-disk"))
	anonymous.Params = slices.DeleteFunc(anonymous.Params, func(p pipelinev1.Param) bool { return strings.HasPrefix(p.Name, "gitToken") })
	other.refused(t, f, "another tenant cloning the private repository without a token", anonymous, "authentication required")
}
