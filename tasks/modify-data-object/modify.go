package modifydataobject

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Params are the task's params.
type Params struct {
	Manifest, Namespace string
	WaitForSuccess      bool
	AllowReplace        bool
	// DeleteObject deletes DeleteObjectKind/DeleteObjectName instead.
	DeleteObject                       bool
	DeleteObjectKind, DeleteObjectName string
	// DefaultNamespace is the TaskRun's.
	DefaultNamespace string
	// SetOwnerReference makes Owner (the step's Pod) the created
	// object's owner.
	SetOwnerReference bool
	Owner             metav1.OwnerReference
	// Timeout bounds the wait for success or deletion.
	Timeout time.Duration
	// Poll is how often the object is read while waiting.
	Poll time.Duration
}

// Result names the object.
type Result struct{ Name, Namespace string }

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{"name": r.Name, "namespace": r.Namespace}
}

// Decode parses a DataVolume or DataSource manifest (cdi.kubevirt.io/v1beta1),
// rejecting fields the API does not have.
func Decode(manifest string) (client.Object, error) {
	if manifest == "" {
		return nil, errors.New("param manifest is empty: give a DataVolume or DataSource manifest")
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		return nil, fmt.Errorf("manifest is not YAML or JSON: %w", err)
	}
	var out client.Object
	switch kind, _ := obj["kind"].(string); kind {
	case "DataVolume":
		out = &cdiv1.DataVolume{}
	case "DataSource":
		out = &cdiv1.DataSource{}
	default:
		return nil, fmt.Errorf("manifest is a %q, want kind DataVolume or DataSource", kind)
	}
	if v, _ := obj["apiVersion"].(string); v != cdiv1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("manifest apiVersion %q, want %s", v, cdiv1.SchemeGroupVersion)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, out, true); err != nil {
		return nil, fmt.Errorf("manifest is not a valid %s: %w", obj["kind"], err)
	}
	if out.GetName() == "" && out.GetGenerateName() == "" {
		return nil, errors.New("manifest has neither metadata.name nor metadata.generateName")
	}
	return out, nil
}

// Run creates (or deletes) the object and waits as asked.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (*Result, error) {
	p.Timeout, p.Poll = orDefault(p.Timeout, 30*time.Minute), orDefault(p.Poll, time.Second)
	if p.DeleteObject {
		return remove(ctx, c, p, out)
	}
	obj, err := Decode(p.Manifest)
	if err != nil {
		return nil, err
	}
	switch {
	case p.Namespace != "":
		obj.SetNamespace(p.Namespace)
	case obj.GetNamespace() == "":
		obj.SetNamespace(p.DefaultNamespace)
	}
	if p.SetOwnerReference {
		if p.Owner.Name == "" || p.Owner.UID == "" {
			return nil, errors.New("setOwnerReference is true but the step does not know its Pod (POD_NAME/POD_UID unset)")
		}
		obj.SetOwnerReferences(append(obj.GetOwnerReferences(), p.Owner))
	}
	verb, err := create(ctx, c, obj, p, out)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s %s/%s %s\n", kindOf(obj), obj.GetNamespace(), obj.GetName(), verb)
	if p.WaitForSuccess {
		if err := waitSuccess(ctx, c, obj, p, out); err != nil {
			return nil, err
		}
	}
	return &Result{Name: obj.GetName(), Namespace: obj.GetNamespace()}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *cdiv1.DataSource:
		return "DataSource"
	case *corev1.PersistentVolumeClaim:
		return "PersistentVolumeClaim"
	}
	return "DataVolume"
}

// create creates obj and says what it did; with AllowReplace an existing
// DataSource is updated in place (its users never see it missing) and an
// existing DataVolume is deleted first.
func create(ctx context.Context, c client.Client, obj client.Object, p Params, out io.Writer) (string, error) {
	err := c.Create(ctx, obj)
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return "created", wrap(err, "creating", obj)
	}
	if !p.AllowReplace {
		return "", fmt.Errorf("%s %s/%s exists: set allowReplace to replace it", kindOf(obj), obj.GetNamespace(), obj.GetName())
	}
	if ds, ok := obj.(*cdiv1.DataSource); ok {
		cur := &cdiv1.DataSource{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ds), cur); err != nil {
			return "", wrap(err, "reading", ds)
		}
		cur.Spec, cur.Labels, cur.Annotations = ds.Spec, ds.Labels, ds.Annotations
		if err := c.Update(ctx, cur); err != nil {
			return "", wrap(err, "updating", ds)
		}
		cur.DeepCopyInto(ds)
		return "exists: spec replaced", nil
	}
	fmt.Fprintf(out, "DataVolume %s/%s exists: deleting it first\n", obj.GetNamespace(), obj.GetName())
	if err := deleteAndWait(ctx, c, obj.DeepCopyObject().(client.Object), p); err != nil {
		return "", err
	}
	obj.SetResourceVersion("")
	return "replaced", wrap(c.Create(ctx, obj), "creating", obj)
}

func wrap(err error, verb string, obj client.Object) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s %s/%s: %w", verb, kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
}

// waitSuccess waits for a DataVolume to succeed or a DataSource to be Ready.
func waitSuccess(ctx context.Context, c client.Client, obj client.Object, p Params, out io.Writer) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, p.Poll, p.Timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err
		}
		state, done, err := progress(obj)
		if state != last {
			fmt.Fprintf(out, "%s %s/%s: %s\n", kindOf(obj), obj.GetNamespace(), obj.GetName(), state)
			last = state
		}
		return done, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s %s/%s did not succeed within %s: %s", kindOf(obj), obj.GetNamespace(), obj.GetName(), p.Timeout, last)
	}
	return err
}

// progress describes obj's state, whether it succeeded, and an error when
// it failed for good.
func progress(obj client.Object) (string, bool, error) {
	switch o := obj.(type) {
	case *cdiv1.DataVolume:
		state := fmt.Sprintf("%s %s", o.Status.Phase, o.Status.Progress)
		if o.Status.Phase == cdiv1.Failed {
			return state, false, fmt.Errorf("DataVolume %s/%s failed: %s", o.Namespace, o.Name, condMessage(o))
		}
		return state, o.Status.Phase == cdiv1.Succeeded, nil
	case *cdiv1.DataSource:
		for _, c := range o.Status.Conditions {
			if c.Type == cdiv1.DataSourceReady {
				return fmt.Sprintf("Ready=%s %s", c.Status, c.Message), c.Status == corev1.ConditionTrue, nil
			}
		}
		return "Ready unknown", false, nil
	}
	return "", false, fmt.Errorf("unexpected %T", obj)
}

func condMessage(dv *cdiv1.DataVolume) string {
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeReady && c.Message != "" {
			return c.Message
		}
	}
	return "no message"
}

// remove deletes the named object and waits until it is gone.
func remove(ctx context.Context, c client.Client, p Params, out io.Writer) (*Result, error) {
	var obj client.Object
	switch p.DeleteObjectKind {
	case "DataVolume":
		obj = &cdiv1.DataVolume{}
	case "DataSource":
		obj = &cdiv1.DataSource{}
	case "PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	default:
		return nil, fmt.Errorf("param deleteObjectKind %q: want DataVolume, DataSource or PersistentVolumeClaim", p.DeleteObjectKind)
	}
	if p.DeleteObjectName == "" {
		return nil, errors.New("param deleteObjectName is required with deleteObject")
	}
	ns := p.Namespace
	if ns == "" {
		ns = p.DefaultNamespace
	}
	obj.SetNamespace(ns)
	obj.SetName(p.DeleteObjectName)
	if err := deleteAndWait(ctx, c, obj, p); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s %s/%s deleted\n", p.DeleteObjectKind, ns, p.DeleteObjectName)
	return &Result{Name: p.DeleteObjectName, Namespace: ns}, nil
}

func deleteAndWait(ctx context.Context, c client.Client, obj client.Object, p Params) error {
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return wrap(err, "deleting", obj)
	}
	err := wait.PollUntilContextTimeout(ctx, p.Poll, p.Timeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	return wrap(err, "waiting for the deletion of", obj)
}
