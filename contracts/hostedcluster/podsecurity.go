package hostedcluster

import (
	"fmt"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
)

// PodSecurityLevel is the Pod Security level a HostedCluster's
// control-plane namespace enforces: HyperShift's override annotation
// (Restricted or Baseline, in any case), else Baseline. HyperShift's
// default is Restricted; here the provisioning pipeline runs in that
// namespace too, and Tekton's own init containers meet Restricted only
// with its set-security-context flag, which a cluster may not set.
// Privileged is refused: the namespace is not the tenant's to open up.
func PodSecurityLevel(annotations map[string]string) (psapi.Level, error) {
	v, ok := annotations[hyperv1.PodSecurityAdmissionLabelOverrideAnnotation]
	if !ok {
		return psapi.LevelBaseline, nil
	}
	switch l := psapi.Level(strings.ToLower(v)); l {
	case psapi.LevelRestricted, psapi.LevelBaseline:
		return l, nil
	}
	return "", fmt.Errorf("metadata.annotations[%s]: %q is not supported: Restricted or Baseline", hyperv1.PodSecurityAdmissionLabelOverrideAnnotation, v)
}

// ControlPlaneUser runs the control plane's containers (etcd, the API
// server, the controller manager, the scheduler): not root, so that their
// Pods meet Pod Security "restricted".
const ControlPlaneUser = 65532

// PodSecurity is the control-plane Pods' security context: ControlPlaneUser,
// whose group (fsGroup) may read the Secret files mounted 0400 and write
// etcd's volume, and the runtime's seccomp profile.
func PodSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(int64(ControlPlaneUser)),
		RunAsGroup:     ptr.To(int64(ControlPlaneUser)),
		FSGroup:        ptr.To(int64(ControlPlaneUser)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurity is their containers': no privilege escalation, no
// capabilities.
func ContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
