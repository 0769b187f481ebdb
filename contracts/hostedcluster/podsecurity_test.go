package hostedcluster

import (
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	psapi "k8s.io/pod-security-admission/api"
)

func TestPodSecurityLevel(t *testing.T) {
	for v, want := range map[string]psapi.Level{
		"": psapi.LevelBaseline, "Restricted": psapi.LevelRestricted, "restricted": psapi.LevelRestricted,
		"Baseline": psapi.LevelBaseline, "Privileged": "", "lax": "",
	} {
		ann := map[string]string{hyperv1.PodSecurityAdmissionLabelOverrideAnnotation: v}
		if v == "" {
			ann = nil
		}
		got, err := PodSecurityLevel(ann)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%q: %q, %v; want %q", v, got, err, want)
		}
	}
}
