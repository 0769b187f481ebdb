package instancetype

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

// Kinds a VM's instancetype and preference matchers name (the cluster
// ones when a matcher names none, as in KubeVirt).
const (
	InstancetypeKind        = "VirtualMachineInstancetype"
	ClusterInstancetypeKind = "VirtualMachineClusterInstancetype"
	PreferenceKind          = "VirtualMachinePreference"
	ClusterPreferenceKind   = "VirtualMachineClusterPreference"
)

// Kinds are the kinds vm's matchers name, defaulted ("" when none).
func Kinds(vm *v1.VirtualMachine) (instancetype, preference string) {
	if m := vm.Spec.Instancetype; m != nil {
		instancetype = m.Kind
		if instancetype == "" {
			instancetype = ClusterInstancetypeKind
		}
	}
	if m := vm.Spec.Preference; m != nil {
		preference = m.Kind
		if preference == "" {
			preference = ClusterPreferenceKind
		}
	}
	return instancetype, preference
}

// Get reads the named instancetype or preference (namespaced kinds from
// ns), with its apiVersion and kind set.
func Get(ctx context.Context, r client.Reader, ns, kind, name string) (client.Object, error) {
	var obj client.Object
	switch kind {
	case InstancetypeKind:
		obj = &instancetypev1beta1.VirtualMachineInstancetype{}
	case ClusterInstancetypeKind:
		obj, ns = &instancetypev1beta1.VirtualMachineClusterInstancetype{}, ""
	case PreferenceKind:
		obj = &instancetypev1beta1.VirtualMachinePreference{}
	case ClusterPreferenceKind:
		obj, ns = &instancetypev1beta1.VirtualMachineClusterPreference{}, ""
	default:
		return nil, fmt.Errorf("kind %q is not an instancetype or preference kind", kind)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s not found", kind, name)
		}
		return nil, fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(instancetypev1beta1.SchemeGroupVersion.WithKind(kind))
	return obj, nil
}

// Specs decodes an instancetype's or preference's JSON (an object or a
// ControllerRevision's data) and checks it is within what tekvirt
// implements; exactly one of the results is set, by kind.
func Specs(kind, name string, data []byte) (*instancetypev1beta1.VirtualMachineInstancetypeSpec, *instancetypev1beta1.VirtualMachinePreferenceSpec, error) {
	switch kind {
	case InstancetypeKind, ClusterInstancetypeKind:
		obj := &instancetypev1beta1.VirtualMachineInstancetype{}
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, nil, fmt.Errorf("decoding %s %s: %w", kind, name, err)
		}
		return &obj.Spec, nil, CheckInstancetype(kind, name, &obj.Spec)
	case PreferenceKind, ClusterPreferenceKind:
		obj := &instancetypev1beta1.VirtualMachinePreference{}
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, nil, fmt.Errorf("decoding %s %s: %w", kind, name, err)
		}
		return nil, &obj.Spec, CheckPreference(kind, name, &obj.Spec)
	}
	return nil, nil, fmt.Errorf("kind %q is not an instancetype or preference kind", kind)
}

// Resolve reads what vm names as it is now and applies it to a copy of
// its template's spec: the check admission makes.
func Resolve(ctx context.Context, r client.Reader, vm *v1.VirtualMachine) (*v1.VirtualMachineInstanceSpec, error) {
	spec := &v1.VirtualMachineInstanceSpec{}
	if vm.Spec.Template != nil {
		spec = vm.Spec.Template.Spec.DeepCopy()
	}
	itKind, prefKind := Kinds(vm)
	var it *instancetypev1beta1.VirtualMachineInstancetypeSpec
	var pref *instancetypev1beta1.VirtualMachinePreferenceSpec
	for _, m := range []struct{ kind, name string }{{itKind, name(vm.Spec.Instancetype)}, {prefKind, prefName(vm.Spec.Preference)}} {
		if m.kind == "" {
			continue
		}
		obj, err := Get(ctx, r, vm.Namespace, m.kind, m.name)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		i, p, err := Specs(m.kind, m.name, data)
		if err != nil {
			return nil, err
		}
		if i != nil {
			it = i
		}
		if p != nil {
			pref = p
		}
	}
	if err := Apply(spec, it, pref); err != nil {
		return nil, err
	}
	return spec, nil
}

func name(m *v1.InstancetypeMatcher) string {
	if m == nil {
		return ""
	}
	return m.Name
}

func prefName(m *v1.PreferenceMatcher) string {
	if m == nil {
		return ""
	}
	return m.Name
}
