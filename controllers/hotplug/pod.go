package hotplug

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
)

// The attachment Pods' labels and annotation: KubeVirt's app label, the
// VMI they serve (by UID, and by name to find it from the Pod) and the
// volume each holds.
const (
	AppLabel         = "kubevirt.io"
	AppHotplugDisk   = "hotplug-disk"
	VMIUIDLabel      = "tekvirt.io/hotplug-vmi-uid"
	VMINameLabel     = "tekvirt.io/hotplug-vmi"
	VolumeAnnotation = "tekvirt.io/hotplug-volume"
	// ClaimVolume is the attachment Pod's volume of the claim.
	ClaimVolume = "hotplug-disk"
	// AttacherContainer holds the Pod (and so its volume) on the node.
	AttacherContainer = "hotplug-disk"
)

// AttachmentPod is the Pod that mounts the claim of vmi's volume vol on
// node, next to vmi's launcher Pod launcher, so that the node's handler
// finds the claim's disk there: owned by the launcher Pod (gone with it),
// bound to the node by affinity (the scheduler still checks the claim's
// topology and access mode), running the launcher image as nothing but a
// holder.
func AttachmentPod(vmi *v1.VirtualMachineInstance, vol v1.Volume, launcher *corev1.Pod, image string) *corev1.Pod {
	readOnly := vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly
	node := launcher.Spec.NodeName
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vmi.Namespace, GenerateName: "hp-volume-",
			Labels:          map[string]string{AppLabel: AppHotplugDisk, VMIUIDLabel: string(vmi.UID), VMINameLabel: vmi.Name},
			Annotations:     map[string]string{VolumeAnnotation: vol.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(launcher, corev1.SchemeGroupVersion.WithKind("Pod"))},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
			// Wherever the launcher runs, its disk's holder may: the VM
			// tolerates the node already.
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			PriorityClassName:             launcher.Spec.PriorityClassName,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			SecurityContext:               podsecurity.Pod(launcherpod.User),
			Volumes: []corev1.Volume{{Name: ClaimVolume, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: Claim(vol), ReadOnly: readOnly}}}},
			Containers: []corev1.Container{{
				Name:    AttacherContainer,
				Image:   image,
				Command: []string{"/ko-app/tekvirt-launcher", "--hold"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				VolumeMounts:    []corev1.VolumeMount{{Name: ClaimVolume, MountPath: "/hotplug-disk", ReadOnly: readOnly}},
				SecurityContext: podsecurity.Container(),
			}},
		},
	}
}

// podVolume is the volume an attachment Pod holds ("" for another Pod).
func podVolume(pod *corev1.Pod) string {
	if pod.Labels[AppLabel] != AppHotplugDisk {
		return ""
	}
	return pod.Annotations[VolumeAnnotation]
}

// ready reports whether the attachment Pod holds its claim: its container
// runs, so the kubelet has mounted the volume.
func ready(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == AttacherContainer && cs.Ready {
			return pod.DeletionTimestamp == nil
		}
	}
	return false
}

// unschedulable is the scheduler's reason an attachment Pod waits, or "".
func unschedulable(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("attachment pod %s cannot be scheduled on the VMI's node: %s", pod.Name, c.Message)
		}
	}
	return ""
}
