package vmi

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// VolumeStatus is vmi's status.volumeStatus with each claim volume
// described as KubeVirt's controller describes it (access modes, volume
// mode, capacity, requests) from claims, by claim name; the node's handler
// decides from it whether the VMI can migrate. Entries of other volumes
// are kept.
func VolumeStatus(vmi *v1.VirtualMachineInstance, claims map[string]*corev1.PersistentVolumeClaim) []v1.VolumeStatus {
	old := map[string]v1.VolumeStatus{}
	for _, vs := range vmi.Status.VolumeStatus {
		old[vs.Name] = vs
	}
	var out []v1.VolumeStatus
	for _, vol := range vmi.Spec.Volumes {
		vs, seen := old[vol.Name]
		vs.Name = vol.Name
		name := vmisubset.Claim(vol)
		if pvc := claims[name]; pvc != nil {
			vs.PersistentVolumeClaimInfo = &v1.PersistentVolumeClaimInfo{
				ClaimName: name, AccessModes: pvc.Spec.AccessModes, VolumeMode: pvc.Spec.VolumeMode,
				Capacity: pvc.Status.Capacity, Requests: pvc.Spec.Resources.Requests,
			}
		} else if !seen {
			continue
		}
		out = append(out, vs)
	}
	return out
}

// claims reads the claims of vmi's volumes; one that is missing is left
// out (the launcher Pod then waits for it).
func (r *Reconciler) claims(ctx context.Context, vmi *v1.VirtualMachineInstance) (map[string]*corev1.PersistentVolumeClaim, error) {
	out := map[string]*corev1.PersistentVolumeClaim{}
	for _, vol := range vmi.Spec.Volumes {
		name := vmisubset.Claim(vol)
		if name == "" {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: name}, pvc)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading claim %s of %s: %w", name, klog.KObj(vmi), err)
		}
		out[name] = pvc
	}
	return out, nil
}
