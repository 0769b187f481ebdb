package podsecurity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestViolations(t *testing.T) {
	pod := func() *corev1.PodSpec {
		return &corev1.PodSpec{SecurityContext: Pod(107), Containers: []corev1.Container{{Name: "c", Image: "img", SecurityContext: Container()}}}
	}
	if v, err := Violations(&metav1.ObjectMeta{}, pod()); err != nil || len(v) != 0 {
		t.Errorf("the restricted contexts: %v %v", v, err)
	}
	escalating := pod()
	escalating.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	rooted := pod()
	rooted.SecurityContext.RunAsUser = ptr.To(int64(0))
	for name, spec := range map[string]*corev1.PodSpec{"privilege escalation allowed": escalating, "root": rooted} {
		if v, err := Violations(&metav1.ObjectMeta{}, spec); err != nil || len(v) == 0 {
			t.Errorf("%s passed the restricted checks (%v)", name, err)
		}
	}
}
