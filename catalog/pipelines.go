package catalog

import (
	"fmt"
	"io/fs"
	"path"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tekvirt/tekvirt/pipelines"
)

// PipelineServiceAccountAnnotation names the ServiceAccount a pipeline's
// runs use (tkn pipeline start -s NAME); it is bound to the ClusterRoles of
// every task the pipeline references.
const PipelineServiceAccountAnnotation = "pipeline.kubevirt.io/associatedServiceAccount"

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
	for _, t := range p.Tasks {
		out = append(out, roleBinding(p.ServiceAccount()+"-"+t.Name, ns, t.ClusterRole.GetName(), p.ServiceAccount()))
	}
	return append(out, pl)
}

func serviceAccount(name, ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
}

func roleBinding(name, ns, clusterRole, sa string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": clusterRole},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": ns}},
	}}
}
