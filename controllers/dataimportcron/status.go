package dataimportcron

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/conditions"
)

// observed is what the reconciler saw of a cron's imports.
type observed struct {
	// invalid says why the cron cannot run; pollErr why the last digest
	// poll failed.
	invalid, pollErr error
	// latest is the newest import; ready the newest that succeeded.
	latest, ready *cdiv1.DataVolume
	// polled is set when the digest was read this time.
	polled bool
}

func inFlight(dv *cdiv1.DataVolume) bool {
	return dv != nil && dv.Status.Phase != cdiv1.Succeeded && dv.Status.Phase != cdiv1.Failed
}

// upToDate is the UpToDate condition's status, reason and message.
func upToDate(obs observed) (corev1.ConditionStatus, string, string) {
	switch {
	case obs.invalid != nil:
		return corev1.ConditionFalse, "Invalid", obs.invalid.Error()
	case obs.pollErr != nil:
		return corev1.ConditionFalse, "DigestError", obs.pollErr.Error()
	case obs.latest == nil:
		return corev1.ConditionFalse, "NoImport", "no import yet"
	case obs.latest.Status.Phase == cdiv1.Failed:
		return corev1.ConditionFalse, "ImportFailed", fmt.Sprintf("DataVolume %s failed: %s", obs.latest.Name, conditions.ReadyMessage(obs.latest))
	case inFlight(obs.latest):
		return corev1.ConditionFalse, "ImportProgressing", fmt.Sprintf("DataVolume %s is %s", obs.latest.Name, phase(obs.latest))
	}
	return corev1.ConditionTrue, "UpToDate", fmt.Sprintf("DataSource points at DataVolume %s", obs.latest.Name)
}

func phase(dv *cdiv1.DataVolume) cdiv1.DataVolumePhase {
	if dv.Status.Phase == "" {
		return cdiv1.Pending
	}
	return dv.Status.Phase
}

// nextStatus computes the cron's status; the reconciler patches it.
func nextStatus(c *cdiv1.DataImportCron, obs observed, now metav1.Time) cdiv1.DataImportCronStatus {
	st := *c.Status.DeepCopy()
	if obs.polled {
		st.LastExecutionTimestamp = &now
	}
	st.CurrentImports = nil
	if inFlight(obs.latest) {
		st.CurrentImports = []cdiv1.ImportStatus{{DataVolumeName: obs.latest.Name, Digest: obs.latest.Annotations[DigestAnnotation]}}
	}
	if r := obs.ready; r != nil && (st.LastImportedPVC == nil || st.LastImportedPVC.Name != r.Name) {
		st.LastImportedPVC = &cdiv1.DataVolumeSourcePVC{Namespace: r.Namespace, Name: r.Name}
		st.LastImportTimestamp = &now
	}
	if obs.ready != nil {
		format := cdiv1.DataImportCronSourceFormatPvc
		st.SourceFormat = &format
	}
	if inFlight(obs.latest) {
		setCond(&st, cdiv1.DataImportCronProgressing, corev1.ConditionTrue, "ImportProgressing", "", now)
	} else {
		setCond(&st, cdiv1.DataImportCronProgressing, corev1.ConditionFalse, "NoImport", "", now)
	}
	s, reason, msg := upToDate(obs)
	setCond(&st, cdiv1.DataImportCronUpToDate, s, reason, msg, now)
	return st
}

func setCond(st *cdiv1.DataImportCronStatus, t cdiv1.DataImportCronConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == t {
			c.ConditionState = conditions.Next(&c.ConditionState, s, reason, msg, now)
			return
		}
	}
	st.Conditions = append(st.Conditions, cdiv1.DataImportCronCondition{Type: t, ConditionState: conditions.Next(nil, s, reason, msg, now)})
}
