package catalog_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/runtime"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

// TestPaCSamples: the Pipelines-as-Code samples (pac/.tekton) are
// PipelineRuns Tekton's webhook accepts (no `$(...)` that is not a Tekton
// variable, say) once PaC has substituted its {{ variables }}, triggered by
// an event on main, and run only catalog tasks through the cluster
// resolver from the catalog namespace, each with the params it declares,
// each as its own ServiceAccount.
func TestPaCSamples(t *testing.T) {
	ts, _ := contents(t)
	byName := map[string]pipelinev1.Task{}
	accounts := map[string]string{}
	for _, task := range ts {
		var typed pipelinev1.Task
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(task.Manifest.Object, &typed); err != nil {
			t.Fatal(err)
		}
		byName[task.Name], accounts[task.Name] = typed, task.ServiceAccount()
	}
	files, err := filepath.Glob(filepath.Join("pac", ".tekton", "*.yaml"))
	if err != nil || len(files) != 2 {
		t.Fatalf("pac/.tekton: %v (%v), want pull-request.yaml and push.yaml", files, err)
	}
	for _, path := range files {
		var pr pipelinev1.PipelineRun
		decodeSample(t, path, &pr)
		if pr.Annotations["pipelinesascode.tekton.dev/on-target-branch"] != "[main]" || pr.Annotations["pipelinesascode.tekton.dev/on-event"] == "" {
			t.Errorf("%s: PaC annotations %v, want an event on main", path, pr.Annotations)
		}
		if pr.Spec.PipelineSpec == nil {
			t.Fatalf("%s: no pipelineSpec", path)
		}
		accountOf := map[string]string{}
		for _, s := range pr.Spec.TaskRunSpecs {
			accountOf[s.PipelineTaskName] = s.ServiceAccountName
		}
		for _, pt := range append(pr.Spec.PipelineSpec.Tasks, pr.Spec.PipelineSpec.Finally...) {
			ref := pt.TaskRef
			if ref == nil || ref.Resolver != "cluster" {
				t.Errorf("%s: task %s is not through the cluster resolver: %+v", path, pt.Name, ref)
				continue
			}
			params := map[string]string{}
			for _, p := range ref.Params {
				params[p.Name] = p.Value.StringVal
			}
			task, ok := byName[params["name"]]
			if params["kind"] != "task" || params["namespace"] != hcov1beta1.DefaultTektonPipelinesNamespace || !ok {
				t.Errorf("%s: task %s resolves %v, want a catalog task in %s", path, pt.Name, params, hcov1beta1.DefaultTektonPipelinesNamespace)
				continue
			}
			checkParams(t, path+" task "+pt.Name, task.Spec.Params, pt.Params)
			if accountOf[pt.Name] != accounts[params["name"]] {
				t.Errorf("%s: task %s runs as %q, want %s", path, pt.Name, accountOf[pt.Name], accounts[params["name"]])
			}
		}
		substituted := pr.DeepCopy()
		substituted.Name = "substituted"
		for i := range substituted.Spec.PipelineSpec.Tasks {
			for j, p := range substituted.Spec.PipelineSpec.Tasks[i].Params {
				if strings.Contains(p.Value.StringVal, "{{") {
					substituted.Spec.PipelineSpec.Tasks[i].Params[j].Value.StringVal = strings.NewReplacer("{{ revision }}", "abc", "{{ repo_owner }}", "o", "{{ repo_name }}", "r").Replace(p.Value.StringVal)
				}
			}
		}
		if err := substituted.Validate(context.Background()); err != nil {
			t.Errorf("%s: Tekton's validation: %v", path, err)
		}
	}
}
