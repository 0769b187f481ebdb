package vm

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/instancetype"
	"github.com/tekvirt/tekvirt/controllers/vmdefaults"
)

// +kubebuilder:rbac:groups=instancetype.kubevirt.io,resources=virtualmachineinstancetypes;virtualmachineclusterinstancetypes;virtualmachinepreferences;virtualmachineclusterpreferences,verbs=get
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;create

// expandedSpec is the VMI spec vm starts with: its template expanded with
// the instancetype and preference it names, as captured the first time in
// ControllerRevisions (so later edits of them do not change the VM); the
// captures are noted in vm's status. As KubeVirt's, the VMI gets the VM's
// stable firmware UUID and a disk for every volume before the preference
// applies, so that its preferred bus reaches those disks too.
func (r *Reconciler) expandedSpec(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachineInstanceSpec, error) {
	spec := vm.Spec.Template.Spec.DeepCopy()
	vmdefaults.Firmware(spec, vmdefaults.FirmwareUUID(vm.Name))
	vmdefaults.VolumeDisks(spec)
	itKind, prefKind := instancetype.Kinds(vm)
	var it *instancetypev1beta1.VirtualMachineInstancetypeSpec
	var pref *instancetypev1beta1.VirtualMachinePreferenceSpec
	if m := vm.Spec.Instancetype; m != nil {
		ref, data, err := r.capture(ctx, vm, itKind, m.Name, m.RevisionName, vm.Status.InstancetypeRef)
		if err != nil {
			return nil, err
		}
		vm.Status.InstancetypeRef = ref
		if it, _, err = instancetype.Specs(itKind, m.Name, data); err != nil {
			return nil, err
		}
	}
	if m := vm.Spec.Preference; m != nil {
		ref, data, err := r.capture(ctx, vm, prefKind, m.Name, m.RevisionName, vm.Status.PreferenceRef)
		if err != nil {
			return nil, err
		}
		vm.Status.PreferenceRef = ref
		if _, pref, err = instancetype.Specs(prefKind, m.Name, data); err != nil {
			return nil, err
		}
	}
	if err := instancetype.Apply(spec, it, pref); err != nil {
		return nil, fmt.Errorf("VM %s: %w", klog.KObj(vm), err)
	}
	return spec, nil
}

// capture returns the ControllerRevision data of the named object: the
// revision the VM's spec or status names, else a new one holding the
// object as it is now.
func (r *Reconciler) capture(ctx context.Context, vm *v1.VirtualMachine, kind, name, specRevision string, status *v1.InstancetypeStatusRef) (*v1.InstancetypeStatusRef, []byte, error) {
	revision := specRevision
	if revision == "" && status != nil && status.Name == name && status.Kind == kind && status.ControllerRevisionRef != nil {
		revision = status.ControllerRevisionRef.Name
	}
	if revision != "" {
		cr := &appsv1.ControllerRevision{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: revision}, cr); err != nil {
			return nil, nil, fmt.Errorf("ControllerRevision %s/%s of %s %s: %w", vm.Namespace, revision, kind, name, err)
		}
		return statusRef(kind, name, revision), cr.Data.Raw, nil
	}
	obj, err := instancetype.Get(ctx, r.Reader, vm.Namespace, kind, name)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: revisionName(vm.Name, obj)},
		Data:       runtime.RawExtension{Raw: data},
		Revision:   obj.GetGeneration(),
	}
	if err := controllerutil.SetControllerReference(vm, cr, r.Client.Scheme()); err != nil {
		return nil, nil, err
	}
	if err := r.Client.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("capturing %s %s: %w", kind, name, err)
	}
	return statusRef(kind, name, cr.Name), data, nil
}

func statusRef(kind, name, revision string) *v1.InstancetypeStatusRef {
	return &v1.InstancetypeStatusRef{Kind: kind, Name: name, ControllerRevisionRef: &v1.ControllerRevisionRef{Name: revision}}
}

// revisionName is KubeVirt's: <vm>-<object>-<object uid>-<generation>.
func revisionName(vm string, obj client.Object) string {
	name := fmt.Sprintf("%s-%s-%s-%d", vm, obj.GetName(), obj.GetUID(), obj.GetGeneration())
	if len(name) > 253 {
		name = name[:253]
	}
	return name
}
