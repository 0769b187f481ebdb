package subresources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/frontproxy"
	"github.com/tekvirt/tekvirt/controllers/hotplug"
)

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;patch

// KubeVirt's answer for a VMI that is not running, which clients match.
const vmiNotRunning = "VMI is not running"

// volumeSubresources are served on both VMs and VMIs.
var volumeSubresources = []string{"addvolume", "removevolume"}

// volumeRequest reads an addvolume or removevolume body into the request
// it makes, with its dry run.
func volumeRequest(add bool, body []byte) (v1.VirtualMachineVolumeRequest, []string, error) {
	if len(body) == 0 {
		return v1.VirtualMachineVolumeRequest{}, nil, apierrors.NewBadRequest("Request with no body, a new name is expected as the request body")
	}
	if add {
		opts := &v1.AddVolumeOptions{}
		if err := decode(body, opts); err != nil {
			return v1.VirtualMachineVolumeRequest{}, nil, err
		}
		if err := hotplug.Normalize(opts); err != nil {
			return v1.VirtualMachineVolumeRequest{}, nil, apierrors.NewBadRequest(err.Error())
		}
		return v1.VirtualMachineVolumeRequest{AddVolumeOptions: opts}, opts.DryRun, nil
	}
	opts := &v1.RemoveVolumeOptions{}
	if err := decode(body, opts); err != nil {
		return v1.VirtualMachineVolumeRequest{}, nil, err
	}
	if opts.Name == "" {
		return v1.VirtualMachineVolumeRequest{}, nil, apierrors.NewBadRequest("RemoveVolumeOptions requires name to be set")
	}
	return v1.VirtualMachineVolumeRequest{RemoveVolumeOptions: opts}, opts.DryRun, nil
}

// volumeChange serves {virtualmachines,virtualmachineinstances}/{name}/
// {addvolume,removevolume} as KubeVirt's virt-api with hotplug volumes:
// on a VMI, the volume and its disk go into the running VMI's spec (gone
// with the VMI); on a VM, the request goes into the VM's
// status.volumeRequests, which the VM controller applies to the VM's
// template and its running VMI (kept across restarts: virtctl --persist).
func (a *API) volumeChange(resource, sub string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if err := a.authorize(ctx, "update", resource, sub, ns, name); err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		body, err := readBody(r)
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		req, dryRun, err := volumeRequest(sub == "addvolume", body)
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		var opts []client.SubResourcePatchOption
		var specOpts []client.PatchOption
		switch {
		case len(dryRun) == 0:
		case slices.Equal(dryRun, []string{metav1.DryRunAll}):
			opts, specOpts = append(opts, client.DryRunAll), append(specOpts, client.DryRunAll)
		default:
			frontproxy.WriteStatus(w, apierrors.NewBadRequest(`dryRun may only be ["All"]`))
			return
		}
		if req.AddVolumeOptions != nil {
			if err := a.checkClaim(ctx, ns, name, req.AddVolumeOptions); err != nil {
				frontproxy.WriteStatus(w, err)
				return
			}
		}
		for attempt := 1; ; attempt++ {
			if resource == "virtualmachineinstances" {
				err = a.patchVMIVolumes(ctx, ns, name, req, specOpts)
			} else {
				err = a.requestVMVolume(ctx, ns, name, req, opts)
			}
			var lost lostRace
			if !errors.As(err, &lost) {
				break
			}
			if attempt == raceAttempts {
				err = apierrors.NewConflict(vmResource, name, lost.err)
				break
			}
		}
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		u, _ := frontproxy.User(ctx)
		a.Log.Info("volume hotplug request", "resource", resource, "change", sub, "namespace", ns, "name", name,
			"volume", volumeName(req), "user", u.Username, "dryRun", len(dryRun) > 0)
		w.WriteHeader(http.StatusAccepted)
	}
}

func volumeName(req v1.VirtualMachineVolumeRequest) string {
	if req.AddVolumeOptions != nil {
		return req.AddVolumeOptions.Name
	}
	return req.RemoveVolumeOptions.Name
}

// patchVMIVolumes applies req to the running VMI's spec, if its volumes are
// still those read.
func (a *API) patchVMIVolumes(ctx context.Context, ns, name string, req v1.VirtualMachineVolumeRequest, opts []client.PatchOption) error {
	vmi := &v1.VirtualMachineInstance{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		return err
	}
	if vmi.Status.Phase != v1.Running || vmi.DeletionTimestamp != nil {
		return apierrors.NewConflict(vmiResource, name, errors.New(vmiNotRunning))
	}
	if err := hotplug.Check(&vmi.Spec, req); err != nil {
		return apierrors.NewConflict(vmiResource, name, err)
	}
	base := vmi.DeepCopy()
	vmi.Spec = *hotplug.Apply(&vmi.Spec, req)
	if err := a.Client.Patch(ctx, vmi, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), opts...); err != nil {
		return raced(fmt.Errorf("patching the volumes of VMI %s/%s: %w", ns, name, err))
	}
	return nil
}

// requestVMVolume adds req to the VM's status.volumeRequests: an add
// request once per volume, a removal replacing a pending add of the same
// volume, as KubeVirt's.
func (a *API) requestVMVolume(ctx context.Context, ns, name string, req v1.VirtualMachineVolumeRequest, opts []client.SubResourcePatchOption) error {
	vm := &v1.VirtualMachine{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		return err
	}
	var spec *v1.VirtualMachineInstanceSpec
	if vm.Spec.Template != nil {
		spec = &vm.Spec.Template.Spec
	} else {
		spec = &v1.VirtualMachineInstanceSpec{}
	}
	if err := hotplug.Check(spec, req); err != nil {
		return apierrors.NewConflict(vmResource, name, err)
	}
	reqs, err := hotplug.Queue(vm.Status.VolumeRequests, req)
	if err != nil {
		return apierrors.NewConflict(vmResource, name, err)
	}
	base := vm.DeepCopy()
	vm.Status.VolumeRequests = reqs
	if err := a.Client.Status().Patch(ctx, vm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), opts...); err != nil {
		return raced(fmt.Errorf("requesting the volume change of VM %s/%s: %w", ns, name, err))
	}
	return nil
}
