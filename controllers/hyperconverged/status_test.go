package hyperconverged

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

func TestSetConditions(t *testing.T) {
	ns := "custom"
	tests := []struct {
		name      string
		spec      hcov1beta1.HyperConvergedSpec
		before    []metav1.Condition
		obs       observed
		want      map[string]metav1.ConditionStatus
		reason    string
		msgHas    string
		installed int
	}{
		{
			name:   "installed into the default namespace",
			obs:    observed{installed: 3},
			want:   map[string]metav1.ConditionStatus{ConditionAvailable: "True", ConditionProgressing: "False", ConditionDegraded: "False", ConditionReconcileComplete: "True"},
			reason: ReasonInstalled, msgHas: "3 catalog objects installed in tekvirt", installed: 3,
		},
		{
			name:   "failure names the namespace and cause",
			spec:   hcov1beta1.HyperConvergedSpec{TektonPipelinesNamespace: &ns},
			obs:    observed{err: errors.New("installing the catalog into custom: forbidden")},
			want:   map[string]metav1.ConditionStatus{ConditionAvailable: "False", ConditionProgressing: "True", ConditionDegraded: "True", ConditionReconcileComplete: "False"},
			reason: ReasonInstallFailed, msgHas: "installing the catalog into custom: forbidden",
		},
		{
			name:   "recovery after a failure flips every condition",
			before: []metav1.Condition{{Type: ConditionAvailable, Status: "False", Reason: ReasonInstallFailed}, {Type: ConditionDegraded, Status: "True", Reason: ReasonInstallFailed}},
			obs:    observed{installed: 1},
			want:   map[string]metav1.ConditionStatus{ConditionAvailable: "True", ConditionDegraded: "False"},
			reason: ReasonInstalled, msgHas: "1 catalog objects", installed: 1,
		},
		{
			name:   "components not ready yet are named",
			obs:    observed{installed: 2, components: 12, notReady: []string{"DaemonSet tekvirt-node/tekvirt-handler"}},
			want:   map[string]metav1.ConditionStatus{ConditionAvailable: "False", ConditionProgressing: "True", ConditionDegraded: "False", ConditionReconcileComplete: "True"},
			reason: ReasonNotReady, msgHas: "waiting for DaemonSet tekvirt-node/tekvirt-handler", installed: 2,
		},
		{
			name:   "every component ready",
			obs:    observed{installed: 2, components: 12},
			want:   map[string]metav1.ConditionStatus{ConditionAvailable: "True", ConditionProgressing: "False"},
			reason: ReasonInstalled, msgHas: "12 components ready; 2 catalog objects installed in tekvirt", installed: 2,
		},
		{
			name:   "a second HyperConverged is degraded",
			obs:    observed{notSingleton: true},
			want:   map[string]metav1.ConditionStatus{ConditionAvailable: "False", ConditionDegraded: "True"},
			reason: ReasonNotSingleton, msgHas: SingletonName,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc := &hcov1beta1.HyperConverged{Spec: tt.spec}
			hc.Generation = 7
			hc.Status.Conditions = tt.before
			setConditions(hc, tt.obs)
			for typ, status := range tt.want {
				c := meta.FindStatusCondition(hc.Status.Conditions, typ)
				if c == nil || c.Status != status || c.Reason != tt.reason || c.ObservedGeneration != 7 {
					t.Fatalf("condition %s = %+v, want %s/%s at generation 7", typ, c, status, tt.reason)
				}
				if !strings.Contains(c.Message, tt.msgHas) {
					t.Fatalf("condition %s message %q lacks %q", typ, c.Message, tt.msgHas)
				}
			}
			if hc.Status.ObservedGeneration != 7 || hc.Status.InstalledObjects != tt.installed {
				t.Fatalf("status = %+v", hc.Status)
			}
		})
	}
}
