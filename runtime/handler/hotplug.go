package handler

import (
	"context"
	"fmt"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// KubeVirt's virt-handler reasons for the hotplug phases it sets.
const (
	reasonVolumeReady     = "VolumeReady"
	reasonVolumeUnmounted = "VolumeUnMountedFromPod"
	reasonVolumeFailed    = "VolumeAttachFailed"
)

// hotplugWork is what the handler does with the hotplugged volumes of a
// running domain whose disks (targets by volume name) are attached: attach
// the volumes whose attachment Pod holds their claim, detach those that
// left the spec.
type hotplugWork struct {
	attach []v1.VolumeStatus
	detach []string
}

// planHotplug decides it from the VMI's spec and status and the domain's
// disks.
func planHotplug(vmi *v1.VirtualMachineInstance, disks map[string]string) hotplugWork {
	var w hotplugWork
	inSpec := map[string]bool{}
	for _, vol := range vmi.Spec.Volumes {
		if vmisubset.IsHotplug(vol) {
			inSpec[vol.Name] = true
		}
	}
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.HotplugVolume == nil {
			continue
		}
		_, attached := disks[vs.Name]
		switch {
		case inSpec[vs.Name] && !attached && vs.HotplugVolume.AttachPodUID != "" && vs.Phase == v1.HotplugVolumeAttachedToNode:
			w.attach = append(w.attach, vs)
		case !inSpec[vs.Name] && attached:
			w.detach = append(w.detach, vs.Name)
		}
	}
	return w
}

// hotplugStatus is the VMI's status.volumeStatus with the handler's
// phases: Ready with its target for a hotplugged volume the domain has,
// UnMountedFromPod for one out of the spec that the domain no longer has,
// and the attach failures (by volume) as the reason it waits.
func hotplugStatus(vmi *v1.VirtualMachineInstance, disks map[string]string, failed map[string]error) []v1.VolumeStatus {
	inSpec := map[string]bool{}
	for _, vol := range vmi.Spec.Volumes {
		if vmisubset.IsHotplug(vol) {
			inSpec[vol.Name] = true
		}
	}
	out := make([]v1.VolumeStatus, 0, len(vmi.Status.VolumeStatus))
	for _, vs := range vmi.Status.VolumeStatus {
		vs = *vs.DeepCopy()
		target, attached := disks[vs.Name]
		switch {
		case vs.HotplugVolume == nil:
		case inSpec[vs.Name] && attached:
			vs.Phase, vs.Target, vs.Reason = v1.VolumeReady, target, reasonVolumeReady
			vs.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", vs.Name)
		case inSpec[vs.Name] && failed[vs.Name] != nil:
			vs.Reason, vs.Message = reasonVolumeFailed, failed[vs.Name].Error()
		case !inSpec[vs.Name] && !attached && (vs.Phase == v1.VolumeReady || vs.Phase == v1.HotplugVolumeMounted):
			vs.Phase, vs.Target, vs.Reason = v1.HotplugVolumeUnMounted, "", reasonVolumeUnmounted
			vs.Message = fmt.Sprintf("Volume %s has been unmounted from virt-launcher pod", vs.Name)
		}
		out = append(out, vs)
	}
	return out
}

// syncHotplug attaches and detaches the running domain's hotplugged
// volumes and reports them, if the VMI's volume status is still the one
// read (the controller writes the phases before).
func (h *Handler) syncHotplug(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir, st *launcher.Status) error {
	if st == nil || (st.Domain != "running" && st.Domain != "paused") || migrating(vmi) != nil {
		return nil
	}
	disks := st.Disks
	work := planHotplug(vmi, disks)
	failed := map[string]error{}
	if len(work.attach)+len(work.detach) > 0 {
		disks = map[string]string{}
		for k, v := range st.Disks {
			disks[k] = v
		}
	}
	for _, vs := range work.attach {
		target, err := h.attachDisk(ctx, vmi, d, vs)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "hotplug attach", "vmi", klog.KObj(vmi), "volume", vs.Name)
			failed[vs.Name] = err
			continue
		}
		ctrl.LoggerFrom(ctx).Info("volume hotplugged", "vmi", klog.KObj(vmi), "volume", vs.Name, "target", target)
		disks[vs.Name] = target
	}
	for _, name := range work.detach {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := d.client().DetachDisk(cctx, name)
		cancel()
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("hotplugged volume not detached yet", "vmi", klog.KObj(vmi), "volume", name, "reason", err.Error())
			continue
		}
		if err := d.pod.hotplug.Unmount(launcherpod.HotplugName(name)); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "unmounting an unplugged volume", "vmi", klog.KObj(vmi), "volume", name)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("volume unplugged", "vmi", klog.KObj(vmi), "volume", name)
		delete(disks, name)
	}
	status := hotplugStatus(vmi, disks, failed)
	if equality.Semantic.DeepEqual(status, vmi.Status.VolumeStatus) {
		return nil
	}
	base := vmi.DeepCopy()
	vmi.Status.VolumeStatus = status
	err := h.Client.Status().Patch(ctx, vmi, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return nil // read again at the next look, which is soon
	}
	if err != nil {
		return fmt.Errorf("reporting the hotplugged volumes of %s: %w", klog.KObj(vmi), err)
	}
	h.hotplugEvents(vmi, base.Status.VolumeStatus, status)
	return nil
}

// attachDisk opens the claim's disk where the attachment Pod holds it on
// this node and hands it to the launcher.
func (h *Handler) attachDisk(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir, vs v1.VolumeStatus) (string, error) {
	var vol *v1.Volume
	var disk *v1.Disk
	for i := range vmi.Spec.Volumes {
		if vmi.Spec.Volumes[i].Name == vs.Name {
			vol = &vmi.Spec.Volumes[i]
		}
	}
	for i := range vmi.Spec.Domain.Devices.Disks {
		if vmi.Spec.Domain.Devices.Disks[i].Name == vs.Name {
			disk = &vmi.Spec.Domain.Devices.Disks[i]
		}
	}
	if vol == nil || disk == nil {
		return "", fmt.Errorf("volume %s has no disk in spec.domain.devices.disks", vs.Name)
	}
	readOnly := vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly
	if d.pod.hotplug.Path == "" {
		return "", fmt.Errorf("the launcher Pod has no %s volume (made before hotplug was served): restart the VM", launcherpod.HotplugVolume)
	}
	field := "hotplugged volume " + vol.Name
	claim := vmisubset.Claim(*vol)
	dir, err := h.claimDir(ctx, vmi.Namespace, claim, field, vs.HotplugVolume.AttachPodUID)
	if err != nil {
		return "", err
	}
	f, err := openDisk(dir, vmi.Namespace, claim, field, readOnly)
	if err != nil {
		return "", err
	}
	f.Close()
	name := launcherpod.HotplugName(vol.Name)
	if err := d.pod.hotplug.Mount(dir, name, readOnly); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return d.client().AttachDisk(cctx, launcher.AttachRequest{Disk: *disk, Path: path.Join(launcherpod.HotplugDir, name, pvcDiskFile), ReadOnly: readOnly})
}

// hotplugEvents records the handler's hotplug phase changes as KubeVirt's
// virt-handler does.
func (h *Handler) hotplugEvents(vmi *v1.VirtualMachineInstance, old, now []v1.VolumeStatus) {
	if h.Recorder == nil {
		return
	}
	was := map[string]v1.VolumeStatus{}
	for _, vs := range old {
		was[vs.Name] = vs
	}
	for _, vs := range now {
		if vs.HotplugVolume == nil || vs.Reason == was[vs.Name].Reason && vs.Phase == was[vs.Name].Phase {
			continue
		}
		kind := corev1.EventTypeNormal
		if vs.Reason == reasonVolumeFailed {
			kind = corev1.EventTypeWarning
		}
		h.Recorder.Eventf(vmi, nil, kind, vs.Reason, "Hotplug", "%s", vs.Message)
	}
}

// hotplugPending reports whether a hotplugged volume waits for the
// handler: one whose attachment Pod holds its claim and is not in the
// domain yet, or one out of the spec still in it. The VMI is then looked
// at again soon (an attach that failed is tried again), not at the
// running VM's slow pace; a volume still waiting for its Pod is the
// controller's, whose status change brings the VMI back here.
func hotplugPending(vmi *v1.VirtualMachineInstance) bool {
	inSpec := map[string]bool{}
	for _, vol := range vmi.Spec.Volumes {
		if vmisubset.IsHotplug(vol) {
			inSpec[vol.Name] = true
		}
	}
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.HotplugVolume == nil {
			continue
		}
		attaching := inSpec[vs.Name] && vs.HotplugVolume.AttachPodUID != "" && vs.Phase != v1.VolumeReady
		detaching := !inSpec[vs.Name] && (vs.Phase == v1.VolumeReady || vs.Phase == v1.HotplugVolumeMounted)
		if attaching || detaching {
			return true
		}
	}
	return false
}
