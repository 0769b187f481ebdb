package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

func param(n, v string) pipelinev1.Param {
	return pipelinev1.Param{Name: n, Value: *pipelinev1.NewStructuredValues(v)}
}

// TestResolverOverhead compares create -> Succeeded of the same one-step
// TaskRun with its Task by name and through the cluster, http and bundles
// resolvers, interleaved, median of 5 each, as ratios to the Task by name.
// (The git resolver needs the forge; `make e2e-forge` times its pipeline.)
func TestResolverOverhead(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	ns := framework.CatalogNamespace
	task := &pipelinev1.Task{TypeMeta: metav1.TypeMeta{APIVersion: "tekton.dev/v1", Kind: "Task"},
		ObjectMeta: metav1.ObjectMeta{Name: "bench-resolved-true"},
		Spec:       pipelinev1.TaskSpec{Steps: []pipelinev1.Step{{Name: "true", Image: shellImage(t, f), Command: []string{"true"}}}}}
	installed := task.DeepCopy()
	installed.Namespace = ns
	if _, err := f.Tekton.TektonV1().Tasks(ns).Create(ctx, installed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Tekton.TektonV1().Tasks(ns).Delete(context.Background(), task.Name, metav1.DeleteOptions{})
	})

	dir := t.TempDir()
	data, err := yaml.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "task.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	url := f.ServeDir(t, dir) + "/task.yaml"

	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(task)
	if err != nil {
		t.Fatal(err)
	}
	img, err := catalog.Bundle(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := name.ParseReference(f.ServeRegistry(t, f.Namespace(t)) + "/bench/resolved-true:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(bundle, img); err != nil {
		t.Fatal(err)
	}

	refs := []struct {
		how string
		ref *pipelinev1.TaskRef
	}{
		{"by name", &pipelinev1.TaskRef{Name: task.Name}},
		{"through the cluster resolver", &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "cluster", Params: pipelinev1.Params{
			param("kind", "task"), param("name", task.Name), param("namespace", ns)}}}},
		{"through the http resolver", &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "http", Params: pipelinev1.Params{param("url", url)}}}},
		{"through the bundles resolver", &pipelinev1.TaskRef{ResolverRef: pipelinev1.ResolverRef{Resolver: "bundles", Params: pipelinev1.Params{
			param("bundle", bundle.String()), param("name", task.Name), param("kind", "task")}}}},
	}
	took := make([][]time.Duration, len(refs))
	for i := 0; i < runs; i++ {
		for j, r := range refs {
			tr := &pipelinev1.TaskRun{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-resolved-", Namespace: ns},
				Spec: pipelinev1.TaskRunSpec{TaskRef: r.ref}}
			took[j] = append(took[j], framework.NewTaskRunRunner(t, f, tr).CreateTaskRun().ExpectSuccess().Elapsed)
		}
	}
	base := median(took[0])
	for j, r := range refs {
		m := median(took[j])
		t.Logf("one-step TaskRun, its Task %s: create->Succeeded median %s of %v (ratio to by name %.2f)", r.how, m, took[j], float64(m)/float64(base))
	}
}
