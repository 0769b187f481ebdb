package catalog

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tekvirt/tekvirt/pipelines"
)

// PipelineServiceAccountAnnotation names the ServiceAccount a pipeline's
// runs use (tkn pipeline start -s NAME); it is bound to the ClusterRoles of
// every task the pipeline references.
const PipelineServiceAccountAnnotation = "pipeline.kubevirt.io/associatedServiceAccount"

// PipelineNamespacesAnnotation lists (comma-separated) further namespaces a
// pipeline works in, where its ServiceAccount gets the same RoleBindings
// (the golden-image pipeline publishes into the golden namespace).
const PipelineNamespacesAnnotation = "pipeline.tekvirt.io/bindNamespaces"

// Pipeline is one catalog pipeline and the catalog tasks it runs.
type Pipeline struct {
	Name     string
	Manifest *unstructured.Unstructured
	Tasks    []Task
}

// ServiceAccount is the name of the ServiceAccount the pipeline runs as.
func (p Pipeline) ServiceAccount() string {
	return p.Manifest.GetAnnotations()[PipelineServiceAccountAnnotation]
}

// Namespaces are the namespaces besides the catalog's the pipeline works in.
func (p Pipeline) Namespaces() []string {
	var out []string
	for _, ns := range strings.Split(p.Manifest.GetAnnotations()[PipelineNamespacesAnnotation], ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// Pipelines reads every pipeline, in name order, and checks that each
// taskRef names a catalog task.
func Pipelines() ([]Pipeline, error) {
	files, err := fs.Glob(pipelines.FS, "*/pipeline.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	ts, err := Tasks()
	if err != nil {
		return nil, err
	}
	byName := map[string]Task{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	var out []Pipeline
	for _, f := range files {
		m, err := readOne(pipelines.FS, f, "Pipeline")
		if err != nil {
			return nil, err
		}
		if m.GetName() != path.Dir(f) {
			return nil, fmt.Errorf("%s: pipeline name %q differs from its folder", f, m.GetName())
		}
		p := Pipeline{Name: m.GetName(), Manifest: m}
		if p.ServiceAccount() == "" {
			return nil, fmt.Errorf("%s: missing annotation %s", f, PipelineServiceAccountAnnotation)
		}
		refs, err := taskRefs(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, ref := range refs {
			t, ok := byName[ref]
			if !ok {
				return nil, fmt.Errorf("%s: taskRef %q is not a catalog task", f, ref)
			}
			p.Tasks = append(p.Tasks, t)
		}
		out = append(out, p)
	}
	return out, nil
}

// taskRefs lists the distinct task names of tasks and finally, in order.
func taskRefs(m *unstructured.Unstructured) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, field := range []string{"tasks", "finally"} {
		list, _, err := unstructured.NestedSlice(m.Object, "spec", field)
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			pt, _ := e.(map[string]any)
			name, _, _ := unstructured.NestedString(pt, "taskRef", "name")
			if name == "" {
				return nil, fmt.Errorf("spec.%s: pipeline task %v has no taskRef.name", field, pt["name"])
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// pipelineObjects are a pipeline, its ServiceAccount and one RoleBinding
// per task role, in namespace ns.
func pipelineObjects(p Pipeline, ns string) []*unstructured.Unstructured {
	pl := p.Manifest.DeepCopy()
	pl.SetNamespace(ns)
	out := []*unstructured.Unstructured{serviceAccount(p.ServiceAccount(), ns)}
	for _, bindNS := range append([]string{ns}, p.Namespaces()...) {
		for _, t := range p.Tasks {
			name := p.ServiceAccount() + "-" + t.Name
			if bindNS != ns {
				name = ns + "-" + name
			}
			out = append(out, roleBinding(name, bindNS, t.ClusterRole.GetName(), p.ServiceAccount(), ns))
		}
	}
	return append(out, pl)
}

// serviceAccount is ServiceAccount ns/name; with ns "" it names no
// namespace and goes where it is applied.
func serviceAccount(name, ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": named(name, ns),
	}}
}

// roleBinding binds clusterRole in ns to the ServiceAccount saNS/sa; with
// both "" it names no namespace, and RBAC takes the subject to be in the
// binding's, wherever it is applied.
func roleBinding(name, ns, clusterRole, sa, saNS string) *unstructured.Unstructured {
	subject := named(sa, saNS)
	subject["kind"] = "ServiceAccount"
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": named(name, ns),
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": clusterRole},
		"subjects": []any{subject},
	}}
}

// named is a name and, unless "", a namespace (metadata, or a subject).
func named(name, ns string) map[string]any {
	meta := map[string]any{"name": name}
	if ns != "" {
		meta["namespace"] = ns
	}
	return meta
}

// InlinePipeline is the catalog pipeline name with every taskRef replaced
// by the catalog task's spec (step image stepImage), for PipelineRuns that
// must not depend on what is installed in their namespace.
func InlinePipeline(name, stepImage string) (*pipelinev1.PipelineSpec, error) {
	ps, err := Pipelines()
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Name != name {
			continue
		}
		pl := &pipelinev1.Pipeline{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(p.Manifest.Object, pl); err != nil {
			return nil, fmt.Errorf("catalog pipeline %s: %w", name, err)
		}
		for _, list := range [][]pipelinev1.PipelineTask{pl.Spec.Tasks, pl.Spec.Finally} {
			for i := range list {
				task, err := InlineTask(list[i].TaskRef.Name, stepImage)
				if err != nil {
					return nil, fmt.Errorf("catalog pipeline %s: %w", name, err)
				}
				list[i].TaskRef = nil
				list[i].TaskSpec = &pipelinev1.EmbeddedTask{TaskSpec: task.Spec,
					Metadata: pipelinev1.PipelineTaskMetadata{Labels: task.Labels, Annotations: task.Annotations}}
			}
		}
		return &pl.Spec, nil
	}
	return nil, fmt.Errorf("the catalog has no %s pipeline", name)
}
