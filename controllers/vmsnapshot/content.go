package vmsnapshot

import (
	"fmt"
	"slices"
	"strings"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

// Labels and names KubeVirt gives what a snapshot makes.
const (
	// SnapshotLabel names, on a VolumeSnapshot, the VM snapshot it is of.
	SnapshotLabel = "snapshot.kubevirt.io/source-vm-snapshot"
	// defaultClassAnnotation marks a cluster's default VolumeSnapshotClass.
	defaultClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"
)

// ContentName is the content of snapshot s.
func ContentName(s *snapshotv1.VirtualMachineSnapshot) string {
	return "vmsnapshot-content-" + string(s.UID)
}

// volumeSnapshotName is the VolumeSnapshot of volume in snapshot s.
func volumeSnapshotName(s *snapshotv1.VirtualMachineSnapshot, volume string) string {
	return fmt.Sprintf("vmsnapshot-%s-volume-%s", s.UID, volume)
}

// VolumeClaim is one of a VM's volumes with a claim, as a snapshot finds it.
type VolumeClaim struct {
	Volume string
	Claim  *corev1.PersistentVolumeClaim
	// SnapshotClass is the VolumeSnapshotClass of the claim's storage
	// class's driver ("" when it has none: the volume is excluded).
	SnapshotClass string
}

// snapshotClassFor picks, of classes, the one of driver: the default one
// if several are ("" when none is).
func snapshotClassFor(classes []vsv1.VolumeSnapshotClass, driver string) string {
	found := ""
	for _, c := range classes {
		if c.Driver != driver {
			continue
		}
		if c.Annotations[defaultClassAnnotation] == "true" {
			return c.Name
		}
		if found == "" {
			found = c.Name
		}
	}
	return found
}

// BuildContent is the content of snapshot s of vm whose volumes' claims
// are claims: the VM as it is and a backup of every claim that can be
// snapshotted.
func BuildContent(s *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine, claims []VolumeClaim) *snapshotv1.VirtualMachineSnapshotContent {
	annotations := map[string]string{}
	for k, v := range vm.Annotations {
		// Who asked for the VM is no one's to hand on through a snapshot.
		if k != requester.Annotation && k != corev1.LastAppliedConfigAnnotation {
			annotations[k] = v
		}
	}
	c := &snapshotv1.VirtualMachineSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: ContentName(s), Namespace: s.Namespace},
		Spec: snapshotv1.VirtualMachineSnapshotContentSpec{
			VirtualMachineSnapshotName: ptr.To(s.Name),
			Source: snapshotv1.SourceSpec{VirtualMachine: &snapshotv1.VirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, Generation: vm.Generation,
					Labels: vm.Labels, Annotations: annotations},
				Spec:   *vm.Spec.DeepCopy(),
				Status: *vm.Status.DeepCopy(),
			}},
		},
	}
	for _, vc := range claims {
		if vc.SnapshotClass == "" {
			continue
		}
		c.Spec.VolumeBackups = append(c.Spec.VolumeBackups, snapshotv1.VolumeBackup{
			VolumeName: vc.Volume,
			PersistentVolumeClaim: snapshotv1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: vc.Claim.Name, Namespace: vc.Claim.Namespace,
					Labels: vc.Claim.Labels, Annotations: claimAnnotations(vc.Claim.Annotations)},
				Spec: *vc.Claim.Spec.DeepCopy(),
			},
			VolumeSnapshotName: ptr.To(volumeSnapshotName(s, vc.Volume)),
		})
	}
	return c
}

// claimAnnotations are a claim's annotations worth restoring: not the
// binding's, the provisioner's or CDI's bookkeeping, nor the requester.
func claimAnnotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, "pv.kubernetes.io/") || strings.HasPrefix(k, "volume.kubernetes.io/") ||
			strings.HasPrefix(k, "volume.beta.kubernetes.io/") || strings.HasPrefix(k, "cdi.kubevirt.io/") ||
			k == requester.Annotation {
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// VolumeLists are the volumes with claims of c's VM that c includes (has
// a backup of) and excludes.
func VolumeLists(c *snapshotv1.VirtualMachineSnapshotContent) *snapshotv1.SnapshotVolumesLists {
	l := &snapshotv1.SnapshotVolumesLists{}
	vm := c.Spec.Source.VirtualMachine
	if vm == nil || vm.Spec.Template == nil {
		return l
	}
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		if vmisubset.Claim(vol) == "" {
			continue
		}
		if slices.ContainsFunc(c.Spec.VolumeBackups, func(b snapshotv1.VolumeBackup) bool { return b.VolumeName == vol.Name }) {
			l.IncludedVolumes = append(l.IncludedVolumes, vol.Name)
		} else {
			l.ExcludedVolumes = append(l.ExcludedVolumes, vol.Name)
		}
	}
	slices.Sort(l.IncludedVolumes)
	slices.Sort(l.ExcludedVolumes)
	return l
}

// VolumeSnapshotFor is the VolumeSnapshot of backup b in content c, taken
// with class.
func VolumeSnapshotFor(c *snapshotv1.VirtualMachineSnapshotContent, b snapshotv1.VolumeBackup, class string) *vsv1.VolumeSnapshot {
	return &vsv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: *b.VolumeSnapshotName, Namespace: c.Namespace,
			Labels: map[string]string{SnapshotLabel: ptr.Deref(c.Spec.VirtualMachineSnapshotName, "")}},
		Spec: vsv1.VolumeSnapshotSpec{
			Source:                  vsv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(b.PersistentVolumeClaim.Name)},
			VolumeSnapshotClassName: ptr.To(class),
		},
	}
}

// volumeSnapshotStatus is what a content shows of vs.
func volumeSnapshotStatus(vs *vsv1.VolumeSnapshot) snapshotv1.VolumeSnapshotStatus {
	vss := snapshotv1.VolumeSnapshotStatus{VolumeSnapshotName: vs.Name}
	if s := vs.Status; s != nil {
		vss.ReadyToUse, vss.CreationTime = s.ReadyToUse, s.CreationTime
		if s.Error != nil && s.Error.Message != nil {
			vss.Error = &snapshotv1.Error{Time: s.Error.Time, Message: s.Error.Message}
		}
	}
	return vss
}

// ContentStatus is c's status given its VolumeSnapshots (by name; a
// missing one is absent): created once every one is cut, ready once every
// one is ready to use, and the first error any reports.
func ContentStatus(c *snapshotv1.VirtualMachineSnapshotContent, snaps map[string]*vsv1.VolumeSnapshot, now metav1.Time) *snapshotv1.VirtualMachineSnapshotContentStatus {
	st := &snapshotv1.VirtualMachineSnapshotContentStatus{}
	if c.Status != nil {
		st.CreationTime = c.Status.CreationTime
	}
	created, ready := true, true
	var missing []string
	var errMsg string
	for _, b := range c.Spec.VolumeBackups {
		name := ptr.Deref(b.VolumeSnapshotName, "")
		vs := snaps[name]
		if vs == nil {
			created, ready = false, false
			missing = append(missing, name)
			continue
		}
		vss := volumeSnapshotStatus(vs)
		if vss.Error != nil && errMsg == "" {
			errMsg = fmt.Sprintf("VolumeSnapshot %s error: %s", name, *vss.Error.Message)
		}
		created = created && vss.CreationTime != nil
		ready = ready && ptr.Deref(vss.ReadyToUse, false)
		st.VolumeSnapshotStatus = append(st.VolumeSnapshotStatus, vss)
	}
	if len(missing) > 0 && st.CreationTime != nil {
		// Taken once, then deleted: the snapshot cannot be restored any more.
		errMsg = fmt.Sprintf("VolumeSnapshots (%s) missing", strings.Join(missing, ","))
	}
	if created && st.CreationTime == nil {
		st.CreationTime = ptr.To(now)
	}
	st.ReadyToUse = ptr.To(ready && errMsg == "")
	st.Error = contentError(c.Status, errMsg, now)
	return st
}

// contentError is the error msg of a content whose status was old (nil
// for none), dated when it first appeared.
func contentError(old *snapshotv1.VirtualMachineSnapshotContentStatus, msg string, now metav1.Time) *snapshotv1.Error {
	if msg == "" {
		return nil
	}
	if old != nil && old.Error != nil && ptr.Deref(old.Error.Message, "") == msg {
		return old.Error.DeepCopy()
	}
	return &snapshotv1.Error{Time: ptr.To(now), Message: ptr.To(msg)}
}
