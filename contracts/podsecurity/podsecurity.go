package podsecurity

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
)

// Pod is a Pod's context under "restricted": not root but uid (and its
// group, which also owns the Pod's volumes that support it, such as
// Secret files mounted 0400), the runtime's seccomp profile.
func Pod(uid int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(uid),
		RunAsGroup:     ptr.To(uid),
		FSGroup:        ptr.To(uid),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// Container is a container's: no privilege escalation, no capabilities,
// not root.
func Container() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
	}
}

// Violations lists what of a Pod (its metadata and spec) Pod Security
// Admission refuses at "restricted", its latest version; none if it
// passes.
func Violations(meta *metav1.ObjectMeta, spec *corev1.PodSpec) ([]string, error) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range eval.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, meta, spec) {
		if !r.Allowed {
			out = append(out, fmt.Sprintf("%s: %s", r.ForbiddenReason, r.ForbiddenDetail))
		}
	}
	return out, nil
}
