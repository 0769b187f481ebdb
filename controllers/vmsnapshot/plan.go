package vmsnapshot

import (
	"encoding/json"
	"fmt"
	"maps"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

const (
	// RestoreLabel names, on a claim or DataVolume a restore made, the
	// restore.
	RestoreLabel = "restore.kubevirt.io/source-vm-restore"
	// lastRestoreAnnotation marks a VM with the last restore written into
	// it (KubeVirt's), so that a restore updates its target once.
	lastRestoreAnnotation = "restore.kubevirt.io/lastRestoreUID"
)

// Plan is what restoring a content into a target makes.
type Plan struct {
	// VM is the target as the restore leaves it.
	VM *v1.VirtualMachine
	// Claims are made for claim volumes, DataVolumes for DataVolume ones.
	Claims      []*corev1.PersistentVolumeClaim
	DataVolumes []*cdiv1.DataVolume
	Restores    []snapshotv1.VolumeRestore
}

// lastRestore is the value of lastRestoreAnnotation restore r writes.
func lastRestore(r *snapshotv1.VirtualMachineRestore) string {
	return fmt.Sprintf("%s-%s", r.Name, r.UID)
}

// Restored reports whether vm already has restore r written into it.
func Restored(r *snapshotv1.VirtualMachineRestore, vm *v1.VirtualMachine) bool {
	return vm != nil && vm.Annotations[lastRestoreAnnotation] == lastRestore(r)
}

// ValidateSnapshot refuses a snapshot of anything but a VM, naming the field.
func ValidateSnapshot(s *snapshotv1.VirtualMachineSnapshot) error {
	src := s.Spec.Source
	if src.Kind != "VirtualMachine" || ptr.Deref(src.APIGroup, "") != v1.SchemeGroupVersion.Group {
		return fmt.Errorf("spec.source: %s %s of group %q cannot be snapshotted: only VirtualMachines of group %s",
			src.Kind, src.Name, ptr.Deref(src.APIGroup, ""), v1.SchemeGroupVersion.Group)
	}
	if src.Name == "" {
		return fmt.Errorf("spec.source.name is required: the VirtualMachine to snapshot")
	}
	return nil
}

// Validate refuses what a restore asks for and tekvirt does not do,
// naming the field.
func Validate(r *snapshotv1.VirtualMachineRestore) error {
	t := r.Spec.Target
	if t.Kind != "VirtualMachine" || ptr.Deref(t.APIGroup, "") != v1.SchemeGroupVersion.Group {
		return fmt.Errorf("spec.target: %s %s of group %q cannot be restored: only VirtualMachines of group %s",
			t.Kind, t.Name, ptr.Deref(t.APIGroup, ""), v1.SchemeGroupVersion.Group)
	}
	if t.Name == "" || r.Spec.VirtualMachineSnapshotName == "" {
		return fmt.Errorf("spec.target.name and spec.virtualMachineSnapshotName are required")
	}
	switch p := ptr.Deref(r.Spec.VolumeRestorePolicy, snapshotv1.VolumeRestorePolicyRandomizeNames); p {
	case snapshotv1.VolumeRestorePolicyRandomizeNames, snapshotv1.VolumeRestorePolicyPrefixTargetName:
	default:
		return fmt.Errorf("spec.volumeRestorePolicy %q is not supported: use %s or %s", p,
			snapshotv1.VolumeRestorePolicyRandomizeNames, snapshotv1.VolumeRestorePolicyPrefixTargetName)
	}
	switch p := ptr.Deref(r.Spec.VolumeOwnershipPolicy, snapshotv1.VolumeOwnershipPolicyVm); p {
	case snapshotv1.VolumeOwnershipPolicyVm, snapshotv1.VolumeOwnershipPolicyNone:
	default:
		return fmt.Errorf("spec.volumeOwnershipPolicy %q is not one of Vm, None", p)
	}
	return nil
}

// restoreName is the claim volume's data is restored into.
func restoreName(r *snapshotv1.VirtualMachineRestore, volume string) string {
	for _, o := range r.Spec.VolumeRestoreOverrides {
		if o.VolumeName == volume && o.RestoreName != "" {
			return o.RestoreName
		}
	}
	if ptr.Deref(r.Spec.VolumeRestorePolicy, "") == snapshotv1.VolumeRestorePolicyPrefixTargetName {
		return r.Spec.Target.Name + "-" + volume
	}
	return fmt.Sprintf("restore-%s-%s", r.UID, volume)
}

// overrides are the labels and annotations the restore gives volume's claim.
func overrides(r *snapshotv1.VirtualMachineRestore, volume string) (labels, annotations map[string]string) {
	for _, o := range r.Spec.VolumeRestoreOverrides {
		if o.VolumeName == volume {
			return o.Labels, o.Annotations
		}
	}
	return nil, nil
}

// PlanRestore is restore r of content c into target (nil: a new VM).
// who is the restore's requester record, which what it makes carries.
func PlanRestore(r *snapshotv1.VirtualMachineRestore, c *snapshotv1.VirtualMachineSnapshotContent, target *v1.VirtualMachine, who string) (Plan, error) {
	src := c.Spec.Source.VirtualMachine
	if src == nil || src.Spec.Template == nil {
		return Plan{}, fmt.Errorf("%s records no VirtualMachine", c.Name)
	}
	spec := src.Spec.DeepCopy()
	var p Plan
	for _, b := range c.Spec.VolumeBackups {
		i := volumeIndex(spec.Template.Spec.Volumes, b.VolumeName)
		if i < 0 {
			return Plan{}, fmt.Errorf("%s backs up volume %s, which its VM does not have", c.Name, b.VolumeName)
		}
		vol := &spec.Template.Spec.Volumes[i]
		name := restoreName(r, b.VolumeName)
		vs := ptr.Deref(b.VolumeSnapshotName, "")
		labels, annotations := overrides(r, b.VolumeName)
		meta := metav1.ObjectMeta{Name: name, Namespace: r.Namespace,
			Labels:      merge(b.PersistentVolumeClaim.Labels, labels, map[string]string{RestoreLabel: r.Name}),
			Annotations: merge(b.PersistentVolumeClaim.Annotations, annotations, nil)}
		claimSpec := b.PersistentVolumeClaim.Spec.DeepCopy()
		claimSpec.VolumeName, claimSpec.Selector, claimSpec.DataSourceRef = "", nil, nil
		claimSpec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(datavolume.SnapshotGroup), Kind: "VolumeSnapshot", Name: vs}
		vr := snapshotv1.VolumeRestore{VolumeName: b.VolumeName, PersistentVolumeClaimName: name, VolumeSnapshotName: vs}
		if vol.DataVolume != nil {
			claimSpec.DataSource = nil
			if who != "" {
				meta.Annotations = merge(meta.Annotations, map[string]string{requester.Annotation: who}, nil)
			}
			p.DataVolumes = append(p.DataVolumes, &cdiv1.DataVolume{ObjectMeta: meta, Spec: cdiv1.DataVolumeSpec{
				Source: &cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Namespace: r.Namespace, Name: vs}},
				PVC:    claimSpec,
			}})
			for j := range spec.DataVolumeTemplates {
				if spec.DataVolumeTemplates[j].Name == vol.DataVolume.Name {
					spec.DataVolumeTemplates[j].Name = name
				}
			}
			vol.DataVolume.Name, vr.DataVolumeName = name, ptr.To(name)
		} else {
			p.Claims = append(p.Claims, &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: *claimSpec})
			vol.PersistentVolumeClaim.ClaimName = name
		}
		p.Restores = append(p.Restores, vr)
	}
	vm, err := restoredVM(r, src, spec, target, who)
	if err != nil {
		return Plan{}, err
	}
	p.VM = vm
	return p, nil
}

// restoredVM is target with spec, or the new VM restore r makes of src.
func restoredVM(r *snapshotv1.VirtualMachineRestore, src *snapshotv1.VirtualMachine, spec *v1.VirtualMachineSpec, target *v1.VirtualMachine, who string) (*v1.VirtualMachine, error) {
	if target != nil {
		vm := target.DeepCopy()
		// An existing VM keeps its run strategy, as KubeVirt's does.
		rs, err := target.RunStrategy()
		if err != nil {
			return nil, err
		}
		vm.Spec = *spec
		vm.Spec.Running, vm.Spec.RunStrategy = nil, ptr.To(rs)
		metav1.SetMetaDataAnnotation(&vm.ObjectMeta, lastRestoreAnnotation, lastRestore(r))
		return vm, nil
	}
	vm := &v1.VirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Spec.Target.Name, Namespace: r.Namespace,
			Labels: maps.Clone(src.Labels), Annotations: maps.Clone(src.Annotations)},
		Spec: *spec,
	}
	// A new VM is created stopped, as KubeVirt's restore does.
	vm.Spec.Running, vm.Spec.RunStrategy = nil, ptr.To(v1.RunStrategyHalted)
	if vm.Name != src.Name {
		// Another VM beside the source: its own firmware UUID and MACs (the
		// webhook and the MAC pool give new ones; the pool refuses a MAC
		// another VM has).
		if fw := vm.Spec.Template.Spec.Domain.Firmware; fw != nil {
			fw.UUID = ""
		}
		for i := range vm.Spec.Template.Spec.Domain.Devices.Interfaces {
			vm.Spec.Template.Spec.Domain.Devices.Interfaces[i].MacAddress = ""
		}
	}
	if len(r.Spec.Patches) > 0 {
		var err error
		if vm, err = applyPatches(vm, r.Spec.Patches); err != nil {
			return nil, err
		}
		if vm.Namespace != r.Namespace {
			return nil, fmt.Errorf("spec.patches: the new VirtualMachine must stay in namespace %s", r.Namespace)
		}
	}
	vm.UID, vm.ResourceVersion = types.UID(""), ""
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, lastRestoreAnnotation, lastRestore(r))
	delete(vm.Annotations, requester.Annotation)
	if who != "" {
		metav1.SetMetaDataAnnotation(&vm.ObjectMeta, requester.Annotation, who)
	}
	return vm, nil
}

// applyPatches applies restore JSON patches (each a JSON patch document or
// a single operation) to vm.
func applyPatches(vm *v1.VirtualMachine, patches []string) (*v1.VirtualMachine, error) {
	doc, err := json.Marshal(vm)
	if err != nil {
		return nil, err
	}
	for _, p := range patches {
		raw := []byte(p)
		if len(raw) > 0 && raw[0] == '{' {
			raw = append(append([]byte{'['}, raw...), ']')
		}
		patch, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return nil, fmt.Errorf("spec.patches: %q: %w", p, err)
		}
		if doc, err = patch.Apply(doc); err != nil {
			return nil, fmt.Errorf("spec.patches: applying %q: %w", p, err)
		}
	}
	out := &v1.VirtualMachine{}
	if err := json.Unmarshal(doc, out); err != nil {
		return nil, fmt.Errorf("spec.patches: the patched VirtualMachine: %w", err)
	}
	return out, nil
}

func volumeIndex(vols []v1.Volume, name string) int {
	for i := range vols {
		if vols[i].Name == name {
			return i
		}
	}
	return -1
}

// merge is a, then b, then c over them (nil when all are empty).
func merge(a, b, c map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{a, b, c} {
		maps.Copy(out, m)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
