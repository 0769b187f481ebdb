package copytemplate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"

	templatev1 "github.com/openshift/api/template/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/templates"
)

// Params are the task's params.
type Params struct {
	SourceName, SourceNamespace string
	TargetName, TargetNamespace string
	AllowReplace                string
	SetOwnerReference           string
	// DefaultNamespace is the TaskRun's.
	DefaultNamespace string
	// Owner is the step's Pod, the owner when SetOwnerReference is true.
	Owner metav1.OwnerReference
}

// Result names the copy.
type Result struct {
	Name, Namespace string
	// Replaced is set when an existing template of that name was
	// replaced, Existed when it already was this copy.
	Replaced, Existed bool
}

// Run copies the source template to the target, replacing a template
// already there only with allowReplace, and finding the copy an earlier run
// made.
func Run(ctx context.Context, c client.Client, p Params) (Result, error) {
	if p.SourceName == "" {
		return Result{}, errors.New("param sourceTemplateName is empty: name the template to copy")
	}
	replace, err := boolParam("allowReplace", p.AllowReplace)
	if err != nil {
		return Result{}, err
	}
	own, err := boolParam("setOwnerReference", p.SetOwnerReference)
	if err != nil {
		return Result{}, err
	}
	srcNS, dstNS := orDefault(p.SourceNamespace, p.DefaultNamespace), orDefault(p.TargetNamespace, p.DefaultNamespace)
	src := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: srcNS, Name: p.SourceName}, src); err != nil {
		return Result{}, fmt.Errorf("reading template %s/%s: %w", srcNS, p.SourceName, err)
	}
	dst, err := templates.Copy(src, p.TargetName, dstNS)
	if err != nil {
		return Result{}, err
	}
	if own {
		if p.Owner.Name == "" || p.Owner.UID == "" {
			return Result{}, errors.New("setOwnerReference is true but the step does not know its Pod (POD_NAME/POD_UID unset)")
		}
		dst.OwnerReferences = []metav1.OwnerReference{p.Owner}
	}
	return write(ctx, c, dst, replace, fmt.Sprintf("%s/%s", srcNS, p.SourceName))
}

// write creates the copy; one of a fixed name that exists already is the
// earlier run's when it has the same content, else replaced only when
// allowed.
func write(ctx context.Context, c client.Client, dst *templatev1.Template, replace bool, source string) (Result, error) {
	if dst.Name != "" {
		existing := &templatev1.Template{}
		err := c.Get(ctx, client.ObjectKeyFromObject(dst), existing)
		switch {
		case err == nil && sameContent(existing, dst):
			return Result{Name: dst.Name, Namespace: dst.Namespace, Existed: true}, nil
		case err == nil && !replace:
			return Result{}, fmt.Errorf("template %s/%s already exists and differs from a copy of %s: set allowReplace to true to replace it", dst.Namespace, dst.Name, source)
		case err == nil:
			dst.ResourceVersion = existing.ResourceVersion
			if err := c.Update(ctx, dst); err != nil {
				return Result{}, fmt.Errorf("replacing template %s/%s: %w", dst.Namespace, dst.Name, err)
			}
			return Result{Name: dst.Name, Namespace: dst.Namespace, Replaced: true}, nil
		case !apierrors.IsNotFound(err):
			return Result{}, fmt.Errorf("reading template %s/%s: %w", dst.Namespace, dst.Name, err)
		}
	}
	if err := c.Create(ctx, dst); err != nil {
		return Result{}, fmt.Errorf("creating template %s/%s%s: %w", dst.Namespace, dst.Name, dst.GenerateName, err)
	}
	return Result{Name: dst.Name, Namespace: dst.Namespace}, nil
}

// sameContent is whether existing is what copying made, ownership and
// server-set fields aside.
func sameContent(existing, copied *templatev1.Template) bool {
	return reflect.DeepEqual(existing.Labels, copied.Labels) && reflect.DeepEqual(existing.Annotations, copied.Annotations) &&
		reflect.DeepEqual(existing.Parameters, copied.Parameters) && reflect.DeepEqual(existing.ObjectLabels, copied.ObjectLabels) &&
		existing.Message == copied.Message && templates.SameObjects(existing.Objects, copied.Objects)
}

func boolParam(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("param %s %q is not true or false", name, v)
	}
	return b, nil
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
