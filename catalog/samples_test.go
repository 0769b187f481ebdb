package catalog_test

import (
	"os"
	"path/filepath"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestEveryTaskAndPipelineHasSamples: each task has samples/ of TaskRuns
// and each pipeline samples/ of PipelineRuns that name it, run as its
// ServiceAccount, set only params it declares (Tekton would ignore any
// other, silently) and every param it requires. e2e runs them.
func TestEveryTaskAndPipelineHasSamples(t *testing.T) {
	ts, ps := contents(t)
	for _, task := range ts {
		var typed pipelinev1.Task
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(task.Manifest.Object, &typed); err != nil {
			t.Fatal(err)
		}
		for _, path := range samples(t, filepath.Join("..", "tasks", task.Name)) {
			var tr pipelinev1.TaskRun
			decodeSample(t, path, &tr)
			if tr.Kind != "TaskRun" || tr.Spec.TaskRef == nil || tr.Spec.TaskRef.Name != task.Name || tr.Spec.ServiceAccountName != task.ServiceAccount() {
				t.Errorf("%s: a %s of %+v as %q, want a TaskRun of %s as %s", path, tr.Kind, tr.Spec.TaskRef, tr.Spec.ServiceAccountName, task.Name, task.ServiceAccount())
			}
			checkParams(t, path, typed.Spec.Params, tr.Spec.Params)
		}
	}
	for _, p := range ps {
		var typed pipelinev1.Pipeline
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(p.Manifest.Object, &typed); err != nil {
			t.Fatal(err)
		}
		for _, path := range samples(t, filepath.Join("..", "pipelines", p.Name)) {
			var pr pipelinev1.PipelineRun
			decodeSample(t, path, &pr)
			if pr.Kind != "PipelineRun" || pr.Spec.PipelineRef == nil || pr.Spec.PipelineRef.Name != p.Name ||
				pr.Spec.TaskRunTemplate.ServiceAccountName != p.ServiceAccount() {
				t.Errorf("%s: a %s of %+v as %q, want a PipelineRun of %s as %s", path, pr.Kind, pr.Spec.PipelineRef, pr.Spec.TaskRunTemplate.ServiceAccountName, p.Name, p.ServiceAccount())
			}
			checkParams(t, path, typed.Spec.Params, pr.Spec.Params)
		}
	}
}

func samples(t *testing.T, dir string) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(dir, "samples", "*.yaml"))
	if err != nil || len(found) == 0 {
		t.Errorf("%s has no samples/*.yaml (%v)", dir, err)
	}
	return found
}

func decodeSample(t *testing.T, path string, obj any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// checkParams fails unless set are declared params and include every
// declared param without a default.
func checkParams(t *testing.T, path string, declared pipelinev1.ParamSpecs, set pipelinev1.Params) {
	t.Helper()
	given := map[string]bool{}
	for _, p := range set {
		given[p.Name] = true
	}
	names := map[string]bool{}
	for _, d := range declared {
		names[d.Name] = true
		if d.Default == nil && !given[d.Name] {
			t.Errorf("%s: required param %s not set", path, d.Name)
		}
	}
	for _, p := range set {
		if !names[p.Name] {
			t.Errorf("%s: param %s is not declared (Tekton would ignore it)", path, p.Name)
		}
	}
}
