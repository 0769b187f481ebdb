package catalog

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/tekvirt/tekvirt/tasks"
)

// Labels every installed object carries, so the controller can find and
// watch what it installed.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "tekvirt"
	PartOfLabel    = "app.kubernetes.io/part-of"
	PartOf         = "tekvirt-catalog"
	// ServiceAccountAnnotation names the ServiceAccount a task runs as.
	ServiceAccountAnnotation = "task.kubevirt.io/associatedServiceAccount"
	// StepImage is the ko:// name of the multi-call step image in task.yaml files.
	StepImage = "ko://github.com/tekvirt/tekvirt/cmd/tekvirt-step"
)

// Task is one catalog task: its Task manifest and the ClusterRole its
// ServiceAccount is bound to.
type Task struct {
	Name        string
	Manifest    *unstructured.Unstructured
	ClusterRole *unstructured.Unstructured
}

// ServiceAccount is the name of the ServiceAccount the task runs as.
func (t Task) ServiceAccount() string {
	return t.Manifest.GetAnnotations()[ServiceAccountAnnotation]
}

// Tasks reads every task of the catalog, in name order.
func Tasks() ([]Task, error) {
	dirs, err := fs.Glob(tasks.FS, "*/task.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(dirs)
	var out []Task
	for _, f := range dirs {
		dir := path.Dir(f)
		task, err := readOne(tasks.FS, f, "Task")
		if err != nil {
			return nil, err
		}
		if task.GetName() != dir {
			return nil, fmt.Errorf("%s: task name %q differs from its folder", f, task.GetName())
		}
		role, err := readOne(tasks.FS, path.Join(dir, "rbac.yaml"), "ClusterRole")
		if err != nil {
			return nil, err
		}
		t := Task{Name: dir, Manifest: task, ClusterRole: role}
		if t.ServiceAccount() == "" {
			return nil, fmt.Errorf("%s: missing annotation %s", f, ServiceAccountAnnotation)
		}
		out = append(out, t)
	}
	return out, nil
}

func readOne(fsys fs.FS, name, kind string) (*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetKind() != kind {
		return nil, fmt.Errorf("%s: kind %q, want %s", name, u.GetKind(), kind)
	}
	return u, nil
}

// ResolveImages replaces every ko://<import path> in manifest with the image
// images holds for it, and fails naming any ko:// reference left over.
func ResolveImages(manifest string, images map[string]string) (string, error) {
	out := manifest
	for importPath, ref := range images {
		out = strings.ReplaceAll(out, "ko://"+importPath, ref)
	}
	if i := strings.Index(out, "ko://"); i >= 0 {
		end := strings.IndexAny(out[i:], "\"' \n,]")
		if end < 0 {
			end = len(out) - i
		}
		return "", fmt.Errorf("no image built for %s", out[i:i+end])
	}
	return out, nil
}

// ClusterRoles returns the ClusterRoles of every task, labelled as catalog objects.
func ClusterRoles() ([]*unstructured.Unstructured, error) {
	ts, err := Tasks()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, t := range ts {
		r := t.ClusterRole.DeepCopy()
		label(r)
		out = append(out, r)
	}
	return out, nil
}

// InstallObjects returns what the controller applies into namespace ns:
// per task its Task (step image set to stepImage), ServiceAccount and the
// RoleBinding of that ServiceAccount to the task's ClusterRole; per
// pipeline its Pipeline, ServiceAccount and RoleBindings to the roles of
// its tasks.
func InstallObjects(ns, stepImage string) ([]*unstructured.Unstructured, error) {
	ts, err := Tasks()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, t := range ts {
		task, err := resolve(t.Manifest, stepImage)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		task.SetNamespace(ns)
		sa := serviceAccount(t.ServiceAccount(), ns)
		rb := roleBinding(t.ServiceAccount(), ns, t.ClusterRole.GetName(), t.ServiceAccount(), ns)
		for _, o := range []*unstructured.Unstructured{sa, rb, task} {
			label(o)
			out = append(out, o)
		}
	}
	ps, err := Pipelines()
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		for _, o := range pipelineObjects(p, ns) {
			label(o)
			out = append(out, o)
		}
	}
	return out, nil
}

// InlineTask is the catalog task name with its step image set to
// stepImage, as InstallObjects installs it, for runs that embed its spec.
func InlineTask(name, stepImage string) (*pipelinev1.Task, error) {
	ts, err := Tasks()
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name != name {
			continue
		}
		o, err := resolve(t.Manifest, stepImage)
		if err != nil {
			return nil, err
		}
		task := &pipelinev1.Task{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, task); err != nil {
			return nil, fmt.Errorf("catalog task %s: %w", name, err)
		}
		return task, nil
	}
	return nil, fmt.Errorf("the catalog has no %s task", name)
}

func resolve(obj *unstructured.Unstructured, stepImage string) (*unstructured.Unstructured, error) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	resolved, err := ResolveImages(string(data), map[string]string{strings.TrimPrefix(StepImage, "ko://"): stepImage})
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON([]byte(resolved)); err != nil {
		return nil, err
	}
	return out, nil
}

func label(o *unstructured.Unstructured) {
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[ManagedByLabel] = ManagedBy
	l[PartOfLabel] = PartOf
	o.SetLabels(l)
}
