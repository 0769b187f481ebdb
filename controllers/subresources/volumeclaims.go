package subresources

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=list

// hotplugClaim is the claim an addvolume request names ("" for none).
func hotplugClaim(opts *v1.AddVolumeOptions) (name string, dataVolume bool) {
	switch src := opts.VolumeSource; {
	case src == nil:
	case src.PersistentVolumeClaim != nil:
		return src.PersistentVolumeClaim.ClaimName, false
	case src.DataVolume != nil:
		return src.DataVolume.Name, true
	}
	return "", false
}

// shared reports whether modes let several nodes' Pods use a claim.
func shared(modes []corev1.PersistentVolumeAccessMode) bool {
	return slices.Contains(modes, corev1.ReadWriteMany) || slices.Contains(modes, corev1.ReadOnlyMany)
}

// checkClaim refuses adding a volume to VMI (or VM) ns/name whose claim
// (or DataVolume) does not exist in ns, or whose single-node claim
// another VMI of ns uses: two guests writing one disk corrupt it.
func (a *API) checkClaim(ctx context.Context, ns, name string, opts *v1.AddVolumeOptions) error {
	claim, isDV := hotplugClaim(opts)
	if claim == "" {
		return nil
	}
	var modes []corev1.PersistentVolumeAccessMode
	pvc := &corev1.PersistentVolumeClaim{}
	switch err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); {
	case err == nil:
		modes = pvc.Spec.AccessModes
	case !apierrors.IsNotFound(err):
		return err
	case !isDV:
		return apierrors.NewBadRequest(fmt.Sprintf("Unable to add volume [%s]: PersistentVolumeClaim %s does not exist in namespace %s", opts.Name, claim, ns))
	default:
		dv := &cdiv1.DataVolume{}
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, dv); err != nil {
			if apierrors.IsNotFound(err) {
				return apierrors.NewBadRequest(fmt.Sprintf("Unable to add volume [%s]: DataVolume %s does not exist in namespace %s", opts.Name, claim, ns))
			}
			return err
		}
		switch {
		case dv.Spec.PVC != nil:
			modes = dv.Spec.PVC.AccessModes
		case dv.Spec.Storage != nil:
			modes = dv.Spec.Storage.AccessModes
		}
	}
	if shared(modes) {
		return nil
	}
	vmis := &v1.VirtualMachineInstanceList{}
	if err := a.Client.List(ctx, vmis, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, vmi := range vmis.Items {
		if vmi.Name == name || vmi.IsFinal() {
			continue
		}
		if slices.ContainsFunc(vmi.Spec.Volumes, func(vol v1.Volume) bool { return vmisubset.Claim(vol) == claim }) {
			return apierrors.NewConflict(vmiResource, name, fmt.Errorf("Unable to add volume [%s]: claim %s is not ReadWriteMany and VirtualMachineInstance %s uses it", opts.Name, claim, vmi.Name)) //nolint:staticcheck // KubeVirt's capitalized message
		}
	}
	return nil
}
