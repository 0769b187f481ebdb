package hostedcluster

import (
	"fmt"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	psapi "k8s.io/pod-security-admission/api"
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
// Pods meet Pod Security "restricted" (podsecurity.Pod); its group reads
// the Secret files mounted 0400 and writes etcd's volume.
const ControlPlaneUser = 65532
