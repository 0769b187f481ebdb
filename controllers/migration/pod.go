package migration

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	v1 "kubevirt.io/api/core/v1"

	vmictrl "github.com/tekvirt/tekvirt/controllers/vmi"
)

// TargetPod is migration m's target launcher Pod for vmi: a launcher Pod
// as the VMI's own (its requests, volumes and constraints), labelled with
// the migration as KubeVirt's, with the migration's addedNodeSelector, and
// never on the node the VMI runs on.
func TargetPod(vmi *v1.VirtualMachineInstance, m *v1.VirtualMachineInstanceMigration, image string) (*corev1.Pod, error) {
	pod, err := vmictrl.LauncherPod(vmi, image)
	if err != nil {
		return nil, err
	}
	pod.Labels[v1.MigrationJobLabel] = string(m.UID)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[v1.MigrationJobNameAnnotation] = m.Name
	if len(m.Spec.AddedNodeSelector) > 0 {
		// It only narrows: where a key is the VMI's too, the VMI's value
		// stays.
		sel := maps.Clone(m.Spec.AddedNodeSelector)
		maps.Copy(sel, pod.Spec.NodeSelector)
		pod.Spec.NodeSelector = sel
	}
	pod.Spec.Affinity = notOn(pod.Spec.Affinity, vmi.Status.NodeName)
	return pod, nil
}

// notOn adds to aff that the Pod must not run on node: to every term of
// its required node affinity (the terms are ORed), or as the only term.
func notOn(aff *corev1.Affinity, node string) *corev1.Affinity {
	out := aff.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil {
		req = &corev1.NodeSelector{}
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	}
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	not := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchFields = append(req.NodeSelectorTerms[i].MatchFields, not)
	}
	return out
}

// Method is how vmi's migration moves its disks, as KubeVirt reports it in
// status.migrationMethod: LiveMigration when every volume is a claim (shared:
// only ReadWriteMany ones can migrate) or a shared host disk, so that only
// memory moves; BlockMigration when some disk is local to the node
// (containerDisk, emptyDisk, cloud-init seed, ...) and is copied.
func Method(vmi *v1.VirtualMachineInstance) v1.VirtualMachineInstanceMigrationMethod {
	for _, vol := range vmi.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim != nil, vol.DataVolume != nil:
		case vol.HostDisk != nil && vol.HostDisk.Shared != nil && *vol.HostDisk.Shared:
		default:
			return v1.BlockMigration
		}
	}
	return v1.LiveMigration
}
