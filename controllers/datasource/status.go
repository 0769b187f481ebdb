package datasource

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/conditions"
)

// observed is what the reconciler found of a DataSource's source.
type observed struct {
	// invalid says why the source cannot be used.
	invalid string
	// pvc is the resolved PVC reference (namespace set).
	pvc *cdiv1.DataVolumeSourcePVC
	// claim is the PVC, nil when missing; dv the DataVolume of that name.
	claim *corev1.PersistentVolumeClaim
	dv    *cdiv1.DataVolume
}

// readiness is the Ready condition's status, reason and message.
func readiness(obs observed) (corev1.ConditionStatus, string, string) {
	switch {
	case obs.invalid != "":
		return corev1.ConditionFalse, "UnsupportedSource", obs.invalid
	case obs.pvc == nil:
		return corev1.ConditionFalse, "NoSource", "no source PVC"
	case obs.dv != nil && obs.dv.Status.Phase != cdiv1.Succeeded:
		phase := obs.dv.Status.Phase
		if phase == "" {
			phase = cdiv1.Pending
		}
		return corev1.ConditionFalse, string(phase), fmt.Sprintf("DataVolume %s/%s is %s", obs.dv.Namespace, obs.dv.Name, phase)
	case obs.claim == nil:
		return corev1.ConditionFalse, "NotFound", fmt.Sprintf("PVC %s/%s not found", obs.pvc.Namespace, obs.pvc.Name)
	case obs.claim.Status.Phase != corev1.ClaimBound:
		return corev1.ConditionFalse, "NotBound", fmt.Sprintf("PVC %s/%s is %s", obs.pvc.Namespace, obs.pvc.Name, obs.claim.Status.Phase)
	}
	return corev1.ConditionTrue, "Ready", ""
}

// nextStatus computes the DataSource status; the reconciler patches it.
func nextStatus(ds *cdiv1.DataSource, obs observed, now metav1.Time) cdiv1.DataSourceStatus {
	st := *ds.Status.DeepCopy()
	st.Source = cdiv1.DataSourceSource{}
	if obs.pvc != nil {
		st.Source.PVC = obs.pvc.DeepCopy()
	}
	status, reason, msg := readiness(obs)
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == cdiv1.DataSourceReady {
			c.ConditionState = conditions.Next(&c.ConditionState, status, reason, msg, now)
			return st
		}
	}
	st.Conditions = append(st.Conditions, cdiv1.DataSourceCondition{Type: cdiv1.DataSourceReady, ConditionState: conditions.Next(nil, status, reason, msg, now)})
	return st
}
