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
