package vmdefaults

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// errNoDefault marks an inference that found no default: with the
// Ignore failure policy the matcher is dropped instead of failing.
var errNoDefault = errors.New("no default")

// Infer replaces the VM's inferFromVolume matchers by the instancetype and
// preference its volume's labels name (instancetype.kubevirt.io/default-*
// on the PVC, DataVolume or DataSource behind it), as KubeVirt's VM
// admission does. With inferFromVolumeFailurePolicy Ignore, a volume that
// names none drops the matcher (and an inferred instancetype drops the
// guest memory virtctl wrote as the fallback); otherwise it is an error
// naming the field. Objects in another namespace than the VM's are read
// only when mayRead allows that namespace (the requester's right to clone
// from there), so that inference tells nobody what another namespace holds.
func Infer(ctx context.Context, r client.Reader, vm *v1.VirtualMachine, mayRead func(ctx context.Context, ns string) error) error {
	if m := vm.Spec.Instancetype; m != nil && m.InferFromVolume != "" {
		name, kind, found, err := infer(ctx, labelReader{r: r, ns: vm.Namespace, mayRead: mayRead, nameLabel: instancetype.DefaultInstancetypeLabel,
			kindLabel: instancetype.DefaultInstancetypeKindLabel}, vm, "spec.instancetype", m.InferFromVolume, m.InferFromVolumeFailurePolicy)
		if err != nil {
			return err
		}
		vm.Spec.Instancetype = nil
		if found {
			vm.Spec.Instancetype = &v1.InstancetypeMatcher{Name: name, Kind: kind}
			if ignoring(m.InferFromVolumeFailurePolicy) && vm.Spec.Template != nil {
				vm.Spec.Template.Spec.Domain.Memory = nil
			}
		}
	}
	if m := vm.Spec.Preference; m != nil && m.InferFromVolume != "" {
		name, kind, found, err := infer(ctx, labelReader{r: r, ns: vm.Namespace, mayRead: mayRead, nameLabel: instancetype.DefaultPreferenceLabel,
			kindLabel: instancetype.DefaultPreferenceKindLabel}, vm, "spec.preference", m.InferFromVolume, m.InferFromVolumeFailurePolicy)
		if err != nil {
			return err
		}
		vm.Spec.Preference = nil
		if found {
			vm.Spec.Preference = &v1.PreferenceMatcher{Name: name, Kind: kind}
		}
	}
	return nil
}

func ignoring(p *v1.InferFromVolumeFailurePolicy) bool {
	return p != nil && *p == v1.IgnoreInferFromVolumeFailure
}

// infer is the default the labels name for the matcher at field, or none
// (found false) when there is none and the policy ignores that.
func infer(ctx context.Context, l labelReader, vm *v1.VirtualMachine, field, volume string, policy *v1.InferFromVolumeFailurePolicy) (name, kind string, found bool, err error) {
	name, kind, err = inferred(ctx, l, vm, volume)
	switch {
	case errors.Is(err, errNoDefault) && ignoring(policy):
		return "", "", false, nil
	case err != nil:
		return "", "", false, fmt.Errorf("%s.inferFromVolume %q: %w", field, volume, err)
	}
	return name, kind, true, nil
}

// inferred reads the default name and kind labels of the object behind
// the VM's volume: a PVC; a DataVolume (the VM's template of that name,
// else the DataVolume, else its PVC) through its source PVC or DataSource;
// a DataSource's own labels, else its PVC's.
func inferred(ctx context.Context, l labelReader, vm *v1.VirtualMachine, volume string) (string, string, error) {
	if vm.Spec.Template == nil {
		return "", "", fmt.Errorf("the VM has no template")
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			return l.pvc(ctx, vm.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.DataVolume != nil:
			for _, t := range vm.Spec.DataVolumeTemplates {
				if t.Name == v.DataVolume.Name {
					return l.dataVolumeSpec(ctx, &t.Spec)
				}
			}
			return l.dataVolume(ctx, v.DataVolume.Name)
		}
		return "", "", fmt.Errorf("%w: volume %q is neither a PVC nor a DataVolume", errNoDefault, volume)
	}
	return "", "", fmt.Errorf("no volume named %q in spec.template.spec.volumes", volume)
}

// labelReader reads the default labels of the objects behind a volume of
// a VM in ns; in any other namespace only where mayRead allows it.
type labelReader struct {
	r                    client.Reader
	ns                   string
	mayRead              func(ctx context.Context, ns string) error
	nameLabel, kindLabel string
}

// get reads an object, in another namespace than the VM's only when
// mayRead allows it.
func (l labelReader) get(ctx context.Context, ns, name string, obj client.Object) error {
	if ns != l.ns {
		if err := l.mayRead(ctx, ns); err != nil {
			return err
		}
	}
	return l.r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
}

func (l labelReader) labels(labels map[string]string) (string, string, error) {
	name, ok := labels[l.nameLabel]
	if !ok {
		return "", "", fmt.Errorf("%w: label %s not found", errNoDefault, l.nameLabel)
	}
	return name, labels[l.kindLabel], nil
}

func (l labelReader) pvc(ctx context.Context, ns, name string) (string, string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := l.get(ctx, ns, name, pvc); err != nil {
		return "", "", fmt.Errorf("reading PVC %s/%s: %w", ns, name, err)
	}
	return l.labels(pvc.Labels)
}

// dataVolume reads the DataVolume's labels, else its source's; a
// DataVolume that is gone leaves its PVC of the same name.
func (l labelReader) dataVolume(ctx context.Context, name string) (string, string, error) {
	dv := &cdiv1.DataVolume{}
	err := l.r.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: name}, dv)
	if apierrors.IsNotFound(err) {
		return l.pvc(ctx, l.ns, name)
	}
	if err != nil {
		return "", "", fmt.Errorf("reading DataVolume %s/%s: %w", l.ns, name, err)
	}
	if name, kind, err := l.labels(dv.Labels); err == nil {
		return name, kind, nil
	}
	return l.dataVolumeSpec(ctx, &dv.Spec)
}

func (l labelReader) dataVolumeSpec(ctx context.Context, spec *cdiv1.DataVolumeSpec) (string, string, error) {
	switch {
	case spec.Source != nil && spec.Source.PVC != nil:
		return l.pvc(ctx, orDefault(spec.Source.PVC.Namespace, l.ns), spec.Source.PVC.Name)
	case spec.SourceRef != nil && spec.SourceRef.Kind == cdiv1.DataVolumeDataSource:
		ns := l.ns
		if spec.SourceRef.Namespace != nil && *spec.SourceRef.Namespace != "" {
			ns = *spec.SourceRef.Namespace
		}
		return l.dataSource(ctx, ns, spec.SourceRef.Name)
	}
	return "", "", fmt.Errorf("%w: its DataVolume's source names no PVC or DataSource", errNoDefault)
}

func (l labelReader) dataSource(ctx context.Context, ns, name string) (string, string, error) {
	ds := &cdiv1.DataSource{}
	if err := l.get(ctx, ns, name, ds); err != nil {
		return "", "", fmt.Errorf("reading DataSource %s/%s: %w", ns, name, err)
	}
	defName, kind, err := l.labels(ds.Labels)
	if err != nil && ds.Spec.Source.PVC != nil {
		return l.pvc(ctx, orDefault(ds.Spec.Source.PVC.Namespace, ns), ds.Spec.Source.PVC.Name)
	}
	return defName, kind, err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
