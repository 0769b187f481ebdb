package modifytemplate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	templatev1 "github.com/openshift/api/template/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/templates"
)

// Params are the task's params as the step receives them.
type Params struct {
	TemplateName, TemplateNamespace  string
	CPUSockets, CPUCores, CPUThreads string
	Memory                           string
	// Arrays, by param name (templateLabels, disks, ...).
	Arrays map[string][]string
	DeleteDisks, DeleteVolumes, DeleteDatavolumeTemplate,
	DeleteTemplateParameters, DeleteTemplate string
	// DefaultNamespace is the TaskRun's.
	DefaultNamespace string
}

// ArrayParams are the task's array params, in the order task.yaml passes
// them.
var ArrayParams = []string{"templateLabels", "templateAnnotations", "vmLabels", "vmAnnotations", "disks", "volumes", "datavolumeTemplates", "templateParameters"}

// Result names the template and says whether it was deleted.
type Result struct {
	Name, Namespace string
	Deleted         bool
}

// Modification reads the params into what to change, naming every param
// that is not valid.
func (p Params) Modification() (templates.Modification, error) {
	var m templates.Modification
	var errs []error
	for _, c := range []struct {
		param, value string
		dst          *uint32
	}{{"cpuSockets", p.CPUSockets, &m.CPUSockets}, {"cpuCores", p.CPUCores, &m.CPUCores}, {"cpuThreads", p.CPUThreads, &m.CPUThreads}} {
		if c.value == "" {
			continue
		}
		n, err := strconv.ParseUint(c.value, 10, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("param %s %q is not a whole number", c.param, c.value))
		}
		*c.dst = uint32(n)
	}
	if p.Memory != "" {
		q, err := resource.ParseQuantity(p.Memory)
		if err != nil || q.Sign() <= 0 {
			errs = append(errs, fmt.Errorf("param memory %q is not a positive quantity (e.g. 2Gi)", p.Memory))
		} else {
			m.Memory = &q
		}
	}
	for _, kv := range []struct {
		param string
		dst   *map[string]string
	}{{"templateLabels", &m.TemplateLabels}, {"templateAnnotations", &m.TemplateAnnotations}, {"vmLabels", &m.VMLabels}, {"vmAnnotations", &m.VMAnnotations}} {
		var err error
		*kv.dst, err = templates.KeyValues(kv.param, p.Arrays[kv.param])
		errs = append(errs, err)
	}
	errs = append(errs,
		decodeAll("disks", p.Arrays["disks"], &m.Disks, func(d v1.Disk) string { return d.Name }),
		decodeAll("volumes", p.Arrays["volumes"], &m.Volumes, func(v v1.Volume) string { return v.Name }),
		decodeAll("datavolumeTemplates", p.Arrays["datavolumeTemplates"], &m.DataVolumeTemplates, func(d v1.DataVolumeTemplateSpec) string { return d.Name }),
		decodeAll("templateParameters", p.Arrays["templateParameters"], &m.Parameters, func(p templatev1.Parameter) string { return p.Name }))
	for _, b := range []struct {
		param, value string
		dst          *bool
	}{
		{"deleteDisks", p.DeleteDisks, &m.DeleteDisks}, {"deleteVolumes", p.DeleteVolumes, &m.DeleteVolumes},
		{"deleteDatavolumeTemplate", p.DeleteDatavolumeTemplate, &m.DeleteDataVolumeTemplates},
		{"deleteTemplateParameters", p.DeleteTemplateParameters, &m.DeleteParameters},
	} {
		var err error
		*b.dst, err = boolParam(b.param, b.value)
		errs = append(errs, err)
	}
	return m, errors.Join(errs...)
}

// decodeAll decodes each JSON entry of an array param strictly into the
// element type (a misspelt field is named); each must have a name.
func decodeAll[T any](param string, entries []string, dst *[]T, name func(T) string) error {
	var errs []error
	for i, e := range entries {
		var v T
		dec := json.NewDecoder(bytes.NewReader([]byte(e)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			errs = append(errs, fmt.Errorf("param %s[%d] is not a valid %T: %w", param, i, v, err))
			continue
		}
		if name(v) == "" {
			errs = append(errs, fmt.Errorf("param %s[%d] has no name", param, i))
		}
		*dst = append(*dst, v)
	}
	return errors.Join(errs...)
}

// Run modifies the template, or deletes it with deleteTemplate. Applying
// the same params again changes nothing more.
func Run(ctx context.Context, c client.Client, p Params) (Result, error) {
	if p.TemplateName == "" {
		return Result{}, errors.New("param templateName is empty: name the template to modify")
	}
	ns := p.TemplateNamespace
	if ns == "" {
		ns = p.DefaultNamespace
	}
	res := Result{Name: p.TemplateName, Namespace: ns}
	del, err := boolParam("deleteTemplate", p.DeleteTemplate)
	if err != nil {
		return res, err
	}
	m, err := p.Modification()
	if err != nil {
		return res, err
	}
	key := client.ObjectKey{Namespace: ns, Name: p.TemplateName}
	if del {
		err := c.Delete(ctx, &templatev1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		if err != nil && !apierrors.IsNotFound(err) {
			return res, fmt.Errorf("deleting template %s: %w", key, err)
		}
		res.Deleted = true
		return res, nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		t := &templatev1.Template{}
		if err := c.Get(ctx, key, t); err != nil {
			return fmt.Errorf("reading template %s: %w", key, err)
		}
		if err := m.Apply(t); err != nil {
			return err
		}
		return c.Update(ctx, t)
	})
	if err != nil {
		return res, fmt.Errorf("modifying template %s: %w", key, err)
	}
	return res, nil
}

func boolParam(name, v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("param %s %q is not true or false", name, v)
	}
	return b, nil
}
