package hotplug

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// KubeVirt's reasons for the controller's hotplug volume phases.
const (
	ReasonPVCNotFound      = "FailedPvcNotFound"
	ReasonPVCNotReady      = "PVCNotReady"
	ReasonCreated          = "SuccessfulCreate"
	ReasonDeleted          = "SuccessfulDelete"
	ReasonUnschedulable    = "AttachmentPodUnschedulable"
	ReasonMissingAttachPod = "MissingAttachmentPod"
	ReasonFailedCreate     = "FailedCreate"
)

// Source is what the controller knows of the claim of a hotplugged volume.
type Source struct {
	// Claim is nil while it does not exist.
	Claim *corev1.PersistentVolumeClaim
	// DataVolume is the volume's DataVolume, when it has one.
	DataVolume *cdiv1.DataVolume
}

// usable says whether an attachment Pod may mount the claim now: it
// exists, and a DataVolume's content is there (or waits for a consumer,
// which the attachment Pod then is). Otherwise it says why not.
func (s Source) usable(claim string) (bool, string, string) {
	if dv := s.DataVolume; dv != nil && dv.Status.Phase != cdiv1.Succeeded && dv.Status.Phase != cdiv1.WaitForFirstConsumer {
		return false, ReasonPVCNotReady, fmt.Sprintf("DataVolume %s is in phase %s", dv.Name, phaseOr(string(dv.Status.Phase), "Pending"))
	}
	if s.Claim == nil {
		return false, ReasonPVCNotFound, fmt.Sprintf("PVC %s not found", claim)
	}
	return true, "", ""
}

func phaseOr(p, none string) string {
	if p == "" {
		return none
	}
	return p
}

// handlerOwns reports whether a volume's phase is the node handler's to
// change: it has the disk (MountedToPod) or the domain has it (Ready).
func handlerOwns(p v1.VolumePhase) bool {
	return p == v1.HotplugVolumeMounted || p == v1.VolumeReady
}

// VolumeStatus is vmi's status.volumeStatus with the controller's part of
// each hotplugged volume brought up to date from its attachment Pod (pods,
// by volume name) and its claim (sources, by volume name): Pending (the
// claim's reason), Bound, AttachedToNode once its Pod exists, with the
// Pod's UID once it holds the claim; the phases the handler set after
// that stay. A volume that left the spec stays, Detaching, until its
// Pod is gone; other volumes' entries are kept as they are.
func VolumeStatus(vmi *v1.VirtualMachineInstance, pods map[string]*corev1.Pod, sources map[string]Source) []v1.VolumeStatus {
	old := map[string]v1.VolumeStatus{}
	for _, vs := range vmi.Status.VolumeStatus {
		old[vs.Name] = *vs.DeepCopy() // changed below, never in vmi
	}
	inSpec := map[string]bool{}
	var out []v1.VolumeStatus
	for _, vol := range vmi.Spec.Volumes {
		inSpec[vol.Name] = true
		vs, seen := old[vol.Name]
		if !IsHotplug(vol) {
			if seen {
				out = append(out, vs)
			}
			continue
		}
		out = append(out, specVolume(vol, vs, pods[vol.Name], sources[vol.Name]))
	}
	for _, vs := range vmi.Status.VolumeStatus {
		if inSpec[vs.Name] {
			continue
		}
		vs = *vs.DeepCopy()
		if vs.HotplugVolume == nil {
			continue // not ours, and not in the spec: gone
		}
		pod := pods[vs.Name]
		switch {
		case handlerOwns(vs.Phase):
			// The handler takes it out of the domain first.
		case pod != nil:
			vs.Phase, vs.Reason = v1.HotplugVolumeDetaching, ReasonDeleted
			vs.Message = fmt.Sprintf("Deleted hotplug attachment pod %s, for volume %s", pod.Name, vs.Name)
		default:
			continue
		}
		out = append(out, vs)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func specVolume(vol v1.Volume, vs v1.VolumeStatus, pod *corev1.Pod, src Source) v1.VolumeStatus {
	vs.Name = vol.Name
	if vs.HotplugVolume == nil {
		vs.HotplugVolume = &v1.HotplugVolumeStatus{}
	}
	if pvc := src.Claim; pvc != nil {
		vs.PersistentVolumeClaimInfo = &v1.PersistentVolumeClaimInfo{
			ClaimName: pvc.Name, AccessModes: pvc.Spec.AccessModes, VolumeMode: pvc.Spec.VolumeMode,
			Capacity: pvc.Status.Capacity, Requests: pvc.Spec.Resources.Requests,
		}
	}
	owned := handlerOwns(vs.Phase)
	switch {
	case pod == nil && owned:
		// Someone deleted the Pod under an attached disk: QEMU keeps its
		// descriptor; a new Pod holds the claim again.
		vs.HotplugVolume.AttachPodName, vs.HotplugVolume.AttachPodUID = "", ""
		vs.Reason, vs.Message = ReasonMissingAttachPod, fmt.Sprintf("the attachment pod of volume %s is gone; a new one is made", vol.Name)
	case pod == nil:
		vs.HotplugVolume.AttachPodName, vs.HotplugVolume.AttachPodUID = "", ""
		if ok, reason, msg := src.usable(Claim(vol)); !ok {
			vs.Phase, vs.Reason, vs.Message = v1.VolumePending, reason, msg
		} else if src.Claim.Status.Phase == corev1.ClaimBound {
			vs.Phase, vs.Reason, vs.Message = v1.VolumeBound, ReasonPVCNotReady, "PVC is in phase Bound"
		} else {
			vs.Phase, vs.Reason, vs.Message = v1.VolumePending, ReasonPVCNotReady, "PVC is in phase "+string(phaseOr(string(src.Claim.Status.Phase), "Pending"))
		}
	default:
		vs.HotplugVolume.AttachPodName = pod.Name
		if ready(pod) {
			vs.HotplugVolume.AttachPodUID = pod.UID
		} else if !owned {
			vs.HotplugVolume.AttachPodUID = ""
		}
		if owned {
			break
		}
		if why := unschedulable(pod); why != "" {
			vs.Phase, vs.Reason, vs.Message = v1.VolumePending, ReasonUnschedulable, why
			break
		}
		vs.Phase, vs.Reason = v1.HotplugVolumeAttachedToNode, ReasonCreated
		vs.Message = fmt.Sprintf("Created hotplug attachment pod %s, for volume %s", pod.Name, vol.Name)
	}
	return vs
}

// Plan is what the controller does with attachment Pods.
type Plan struct {
	// Create are the volumes that need a Pod.
	Create []v1.Volume
	// Delete are Pods no volume needs.
	Delete []*corev1.Pod
}

// PlanPods decides which attachment Pods to make and which to delete,
// given the VMI's status as VolumeStatus computed it, its Pods by volume
// (the one kept) and the Pods no volume keeps (extra).
func PlanPods(vmi *v1.VirtualMachineInstance, status []v1.VolumeStatus, pods map[string]*corev1.Pod, sources map[string]Source) Plan {
	var p Plan
	inSpec := map[string]bool{}
	for _, vol := range vmi.Spec.Volumes {
		if !IsHotplug(vol) {
			continue
		}
		inSpec[vol.Name] = true
		if ok, _, _ := sources[vol.Name].usable(Claim(vol)); ok && pods[vol.Name] == nil {
			p.Create = append(p.Create, vol)
		}
	}
	phase := map[string]v1.VolumePhase{}
	for _, vs := range status {
		phase[vs.Name] = vs.Phase
	}
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pod := pods[name]
		if !inSpec[name] && !handlerOwns(phase[name]) && pod.DeletionTimestamp == nil {
			p.Delete = append(p.Delete, pod)
		}
	}
	return p
}
