package vm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/hotplug"
)

// applyVolumeRequests carries out the VM's status.volumeRequests (virtctl
// addvolume|removevolume --persist) as KubeVirt's controller does: each
// goes into the VM's template and, while it runs, into its VMI's spec;
// then the requests are dropped. A request already applied (a retry after
// a failed write) applies again as nothing; one that cannot apply is
// dropped with a warning event naming it.
func (r *Reconciler) applyVolumeRequests(ctx context.Context, vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) error {
	reqs := vm.Status.VolumeRequests
	if len(reqs) == 0 || vm.Spec.Template == nil || vm.DeletionTimestamp != nil {
		return nil
	}
	var live *v1.VirtualMachineInstanceSpec
	if vmi != nil && vmi.Status.Phase == v1.Running && vmi.DeletionTimestamp == nil {
		live = &vmi.Spec
	}
	template, live, refused := applyRequests(&vm.Spec.Template.Spec, live, reqs)
	for _, err := range refused {
		r.event(vm, corev1.EventTypeWarning, "FailedVolumeRequest", "volume request not applied: %v", err)
	}
	locked := client.MergeFromWithOptimisticLock{}
	if live != nil && !equality.Semantic.DeepEqual(*live, vmi.Spec) {
		base := vmi.DeepCopy()
		vmi.Spec = *live
		if err := r.Client.Patch(ctx, vmi, client.MergeFromWithOptions(base, locked)); err != nil {
			return fmt.Errorf("applying the volume requests of %s to its VMI: %w", klog.KObj(vm), err)
		}
	}
	if !equality.Semantic.DeepEqual(*template, vm.Spec.Template.Spec) {
		base := vm.DeepCopy()
		vm.Spec.Template.Spec = *template
		if err := r.Client.Patch(ctx, vm, client.MergeFromWithOptions(base, locked)); err != nil {
			return fmt.Errorf("applying the volume requests of %s to its template: %w", klog.KObj(vm), err)
		}
	}
	base := vm.DeepCopy()
	vm.Status.VolumeRequests = nil
	if err := r.Client.Status().Patch(ctx, vm, client.MergeFromWithOptions(base, locked)); err != nil {
		return fmt.Errorf("dropping the applied volume requests of %s: %w", klog.KObj(vm), err)
	}
	ctrl.LoggerFrom(ctx).Info("volume requests applied", "vm", klog.KObj(vm), "requests", len(reqs), "vmi", live != nil)
	return nil
}

// applyRequests applies reqs to copies of a VM's template spec and of its
// running VMI's (nil: none), and says which could not apply.
func applyRequests(template, live *v1.VirtualMachineInstanceSpec, reqs []v1.VirtualMachineVolumeRequest) (*v1.VirtualMachineInstanceSpec, *v1.VirtualMachineInstanceSpec, []error) {
	template = template.DeepCopy()
	if live != nil {
		live = live.DeepCopy()
	}
	var refused []error
	for _, req := range reqs {
		var err error
		if template, err = applyOnce(template, req); err != nil {
			refused = append(refused, err)
			continue
		}
		if live == nil {
			continue
		}
		if live, err = applyOnce(live, req); err != nil {
			refused = append(refused, fmt.Errorf("on the running VMI: %w", err))
		}
	}
	return template, live, refused
}

// applyOnce applies req to spec unless spec shows it applied already: an
// added volume of that name and source there, a removed one gone.
func applyOnce(spec *v1.VirtualMachineInstanceSpec, req v1.VirtualMachineVolumeRequest) (*v1.VirtualMachineInstanceSpec, error) {
	err := hotplug.Check(spec, req)
	if err == nil {
		return hotplug.Apply(spec, req), nil
	}
	if applied(spec, req) {
		return spec, nil
	}
	return spec, err
}

func applied(spec *v1.VirtualMachineInstanceSpec, req v1.VirtualMachineVolumeRequest) bool {
	if add := req.AddVolumeOptions; add != nil {
		want := hotplug.Apply(&v1.VirtualMachineInstanceSpec{}, req).Volumes[0]
		for _, vol := range spec.Volumes {
			if vol.Name == add.Name {
				return equality.Semantic.DeepEqual(vol, want)
			}
		}
		return false
	}
	for _, vol := range spec.Volumes {
		if vol.Name == req.RemoveVolumeOptions.Name || hotplug.Claim(vol) == req.RemoveVolumeOptions.Name {
			return false
		}
	}
	return true
}
