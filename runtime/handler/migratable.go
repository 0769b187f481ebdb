package handler

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

// liveMigratable says whether a running vmi can move to another node, with
// KubeVirt's LiveMigratable reasons and messages, checked in KubeVirt's
// order. Local disks (containerDisk overlays, emptyDisks, cloud-init seeds)
// move by block migration; a claim must be ReadWriteMany, as the
// controller recorded in status.volumeStatus.
func liveMigratable(vmi *v1.VirtualMachineInstance) (ok bool, reason, msg string) {
	if msg := disksNotMigratable(vmi); msg != "" {
		return false, v1.VirtualMachineInstanceReasonDisksNotMigratable, msg
	}
	for _, vol := range vmi.Spec.Volumes {
		if vmisubset.IsHotplug(vol) {
			// Its claim is held by an attachment Pod on this node, which
			// a migration would have to move with the launcher.
			return false, v1.VirtualMachineInstanceReasonHotplugNotMigratable, fmt.Sprintf("cannot migrate VMI with hotplugged volume %s: remove it first (virtctl removevolume)", vol.Name)
		}
	}
	if msg := interfacesNotMigratable(vmi); msg != "" {
		return false, v1.VirtualMachineInstanceReasonInterfaceNotMigratable, msg
	}
	if len(vmi.Spec.Domain.Devices.HostDevices) > 0 || len(vmi.Spec.Domain.Devices.GPUs) > 0 {
		return false, v1.VirtualMachineInstanceReasonHostDeviceNotMigratable, "VMI uses a PCI host devices"
	}
	return true, "", ""
}

func disksNotMigratable(vmi *v1.VirtualMachineInstance) string {
	claims := map[string]*v1.PersistentVolumeClaimInfo{}
	for _, vs := range vmi.Status.VolumeStatus {
		claims[vs.Name] = vs.PersistentVolumeClaimInfo
	}
	for _, vol := range vmi.Spec.Volumes {
		claim := vmisubset.Claim(vol)
		if vol.HostDisk != nil && (vol.HostDisk.Shared == nil || !*vol.HostDisk.Shared) {
			return "cannot migrate VMI with non-shared HostDisk"
		}
		if claim == "" {
			continue
		}
		info := claims[vol.Name]
		if info == nil {
			return fmt.Sprintf("cannot migrate VMI: Unable to determine if PVC %s is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", claim)
		}
		if !slices.Contains(info.AccessModes, corev1.ReadWriteMany) {
			return fmt.Sprintf("cannot migrate VMI: PVC %s is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", claim)
		}
	}
	return ""
}

// interfacesNotMigratable: the pod network's interface must be masquerade
// (the guest keeps its address: it is the Pod's private one), or bridge
// when the VMI allows it by KubeVirt's annotation (the guest's address then
// changes with the Pod's). Secondary networks move with their bridges.
func interfacesNotMigratable(vmi *v1.VirtualMachineInstance) string {
	var pod string
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod = n.Name
		}
	}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		if pod == "" || iface.Name != pod || iface.Masquerade != nil {
			continue
		}
		if _, allowed := vmi.Annotations[v1.AllowPodBridgeNetworkLiveMigrationAnnotation]; allowed && iface.Bridge != nil {
			continue
		}
		return "cannot migrate VMI which does not use masquerade, bridge with " + v1.AllowPodBridgeNetworkLiveMigrationAnnotation + " VM annotation or a migratable plugin to connect to the pod network"
	}
	return ""
}

// setLiveMigratable writes the LiveMigratable condition, as KubeVirt's
// handler does for a running VMI: True without a reason, or False with one.
func setLiveMigratable(st *v1.VirtualMachineInstanceStatus, vmi *v1.VirtualMachineInstance, now metav1.Time) {
	if ok, reason, msg := liveMigratable(vmi); ok {
		setCond(st, v1.VirtualMachineInstanceIsMigratable, corev1.ConditionTrue, "", "", now)
	} else {
		setCond(st, v1.VirtualMachineInstanceIsMigratable, corev1.ConditionFalse, reason, msg, now)
	}
}

// claimsVerifiedShared reports whether vmi has claims and every one is on
// a volume the provisioner verified every node shares (see
// hostpath.VerifiedShared). Other ReadWriteMany claims are left to
// libvirt's own check, which passes a shared file system it knows.
func (h *Handler) claimsVerifiedShared(ctx context.Context, vmi *v1.VirtualMachineInstance) (bool, error) {
	claims := 0
	for _, vol := range vmi.Spec.Volumes {
		name := vmisubset.Claim(vol)
		if name == "" {
			continue
		}
		claims++
		pvc := &corev1.PersistentVolumeClaim{}
		if err := h.Client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: name}, pvc); err != nil {
			return false, fmt.Errorf("reading claim %s/%s of %s: %w", vmi.Namespace, name, klog.KObj(vmi), err)
		}
		pv := &corev1.PersistentVolume{}
		if err := h.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, fmt.Errorf("reading volume %s of claim %s/%s: %w", pvc.Spec.VolumeName, vmi.Namespace, name, err)
		}
		if !hostpath.VerifiedShared(pv) {
			return false, nil
		}
	}
	return claims > 0, nil
}
