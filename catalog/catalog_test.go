package catalog_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/tasks/step"
)

const testImage = "127.0.0.1:5000/tekvirt/tekvirt-step@sha256:0000000000000000000000000000000000000000000000000000000000000000"

func typedTasks(t *testing.T) map[string]*pipelinev1.Task {
	t.Helper()
	objs, err := catalog.InstallObjects("tekvirt", testImage)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pipelinev1.Task{}
	for _, o := range objs {
		if o.GetKind() != "Task" {
			continue
		}
		var task pipelinev1.Task
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &task, true); err != nil {
			t.Fatalf("task %s has fields Tekton does not know: %v", o.GetName(), err)
		}
		out[task.Name] = &task
	}
	if len(out) == 0 {
		t.Fatal("catalog has no tasks")
	}
	return out
}

// restricted is the step security context of the restricted Pod Security
// Standard, which every catalog step runs under (the step image's user is
// not root).
var restricted = &corev1.SecurityContext{
	AllowPrivilegeEscalation: ptr.To(false),
	Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	RunAsNonRoot:             ptr.To(true),
	SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
}

// TestTasksPassTektonValidation runs Tekton's own validation on every task,
// as its admission webhook would.
func TestTasksPassTektonValidation(t *testing.T) {
	for name, task := range typedTasks(t) {
		task.SetDefaults(context.Background())
		if err := task.Validate(context.Background()); err != nil {
			t.Errorf("task %s: %v", name, err)
		}
		for _, s := range task.Spec.Steps {
			if s.Image != testImage {
				t.Errorf("task %s step %s: image %q not resolved", name, s.Name, s.Image)
			}
			if len(s.Command) == 0 {
				t.Errorf("task %s step %s: no command (Tekton cannot look up entrypoints here)", name, s.Name)
			}
			if s.Script != "" {
				t.Errorf("task %s step %s: params must reach Go as args, not a script", name, s.Name)
			}
			if !equality.Semantic.DeepEqual(s.SecurityContext, restricted) {
				t.Errorf("task %s step %s: securityContext %+v, want the restricted profile's", name, s.Name, s.SecurityContext)
			}
		}
		for _, k := range []string{"tekton.dev/pipelines.minVersion", "tekton.dev/categories", "tekton.dev/tags", "tekton.dev/displayName", "tekton.dev/platforms"} {
			if task.Annotations[k] == "" {
				t.Errorf("task %s: missing catalog annotation %s", name, k)
			}
		}
		if task.Labels["app.kubernetes.io/version"] == "" {
			t.Errorf("task %s: missing label app.kubernetes.io/version", name)
		}
	}
}

// TestPipelinesPassTektonValidation runs Tekton's validation on every
// pipeline; catalog.Pipelines already checks each taskRef names a catalog task.
func TestPipelinesPassTektonValidation(t *testing.T) {
	ps, err := catalog.Pipelines()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Fatal("catalog has no pipelines")
	}
	for _, p := range ps {
		var pl pipelinev1.Pipeline
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(p.Manifest.Object, &pl, true); err != nil {
			t.Fatalf("pipeline %s has fields Tekton does not know: %v", p.Name, err)
		}
		pl.SetDefaults(context.Background())
		if err := pl.Validate(context.Background()); err != nil {
			t.Errorf("pipeline %s: %v", p.Name, err)
		}
	}
}

var paramRef = regexp.MustCompile(`^\$\(params\.([A-Za-z0-9_]+)(\[\*\])?\)$`)

// TestParamsMatchStepFlags checks that every param reaches the step, string
// params as a flag the step command defines and arrays as positional args.
func TestParamsMatchStepFlags(t *testing.T) {
	root := step.Root()
	for name, task := range typedTasks(t) {
		for _, s := range task.Spec.Steps {
			if len(s.Command) < 2 || s.Command[0] != "/ko-app/tekvirt-step" {
				t.Errorf("task %s step %s: command %v is not the tekvirt-step multi-call", name, s.Name, s.Command)
				continue
			}
			cmd, _, err := root.Find([]string{s.Command[1]})
			if err != nil || cmd == root {
				t.Errorf("task %s: tekvirt-step has no subcommand %q", name, s.Command[1])
				continue
			}
			used := map[string]bool{}
			positional := false
			for i, a := range s.Args {
				if a == "--" {
					positional = true
					continue
				}
				// An array's marker for tasks/arrayargs: --name, then $(params.name[*]).
				if positional && i+1 < len(s.Args) && s.Args[i+1] == "$(params."+strings.TrimPrefix(a, "--")+"[*])" {
					continue
				}
				flag, value, isFlag := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if positional || !strings.HasPrefix(a, "--") {
					m := paramRef.FindStringSubmatch(a)
					if m == nil || m[2] == "" {
						t.Errorf("task %s: positional arg %q is not an array param", name, a)
						continue
					}
					used[m[1]] = true
					continue
				}
				if !isFlag || cmd.Flags().Lookup(flag) == nil {
					t.Errorf("task %s: arg %q: %s has no flag --%s", name, a, s.Command[1], flag)
					continue
				}
				if m := paramRef.FindStringSubmatch(value); m != nil {
					used[m[1]] = true
				}
			}
			for _, p := range task.Spec.Params {
				if !used[p.Name] {
					t.Errorf("task %s: param %s never reaches the step", name, p.Name)
				}
			}
		}
	}
}

func TestInstallObjectsAreLabelledAndBound(t *testing.T) {
	objs, err := catalog.InstallObjects("ns1", testImage)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		boundElsewhere := o.GetKind() == "RoleBinding" && strings.HasPrefix(o.GetName(), "ns1-")
		if o.GetNamespace() != "ns1" && !boundElsewhere {
			t.Errorf("%s %s namespace = %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if o.GetLabels()[catalog.ManagedByLabel] != catalog.ManagedBy {
			t.Errorf("%s %s is not labelled", o.GetKind(), o.GetName())
		}
	}
	ps, err := catalog.Pipelines()
	if err != nil {
		t.Fatal(err)
	}
	pipelineBindings := 0
	for _, p := range ps {
		pipelineBindings += len(p.Tasks) * (1 + len(p.Namespaces()))
	}
	if kinds["Task"] == 0 || kinds["Pipeline"] != len(ps) || kinds["Task"]+kinds["Pipeline"] != kinds["ServiceAccount"] || kinds["Task"]+pipelineBindings != kinds["RoleBinding"] {
		t.Fatalf("kinds = %v, want one ServiceAccount per Task and Pipeline, one RoleBinding per Task and per task of each Pipeline", kinds)
	}
}

func TestResolveImagesNamesMissingImage(t *testing.T) {
	_, err := catalog.ResolveImages(`image: ko://example.test/cmd/x`, map[string]string{"example.test/cmd/y": "r"})
	if err == nil || !strings.Contains(err.Error(), "ko://example.test/cmd/x") {
		t.Fatalf("err = %v", err)
	}
	got, err := catalog.ResolveImages(`["ko://example.test/cmd/y"]`, map[string]string{"example.test/cmd/y": "reg/y@sha256:1"})
	if err != nil || got != `["reg/y@sha256:1"]` {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestInlineTask(t *testing.T) {
	task, err := catalog.InlineTask("import-disk", "reg/step@sha256:1")
	if err != nil {
		t.Fatal(err)
	}
	if steps := task.Spec.Steps; len(steps) == 0 || steps[0].Image != "reg/step@sha256:1" || task.Name != "import-disk" {
		t.Errorf("task %s, steps %v", task.Name, steps)
	}
	if _, err := catalog.InlineTask("no-such-task", "x"); err == nil || !strings.Contains(err.Error(), "no no-such-task task") {
		t.Errorf("unknown task: %v", err)
	}
}

func TestInlinePipeline(t *testing.T) {
	spec, err := catalog.InlinePipeline("provision-hosted-cluster", "reg.example/step@sha256:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Tasks) != 6 {
		t.Fatalf("tasks: %d, want 6", len(spec.Tasks))
	}
	for _, pt := range spec.Tasks {
		if pt.TaskRef != nil || pt.TaskSpec == nil {
			t.Fatalf("task %s is not inlined: %+v", pt.Name, pt)
		}
		if img := pt.TaskSpec.Steps[0].Image; img != "reg.example/step@sha256:1" {
			t.Errorf("task %s step image %q", pt.Name, img)
		}
	}
	pl := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: *spec}
	if err := pl.Validate(context.Background()); err != nil {
		t.Errorf("inlined pipeline fails Tekton's validation: %v", err)
	}
	if _, err := catalog.InlinePipeline("no-such", "x"); err == nil {
		t.Error("an unknown pipeline was inlined")
	}
}
