package datavolume

import (
	"fmt"
	"slices"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"knative.dev/pkg/apis"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/conditions"
)

// ImagePullFailedReason is CDI's reason for an import whose image the
// node cannot pull (pullMethod node: the step runs in that image).
const ImagePullFailedReason = "ImagePullFailed"

// observed is what the reconciler saw of a DataVolume's claim and import.
type observed struct {
	// invalid says why the DataVolume cannot be imported (an unsupported source).
	invalid error
	// waiting says which DataSource the DataVolume waits for.
	waiting string
	// dataSource is the DataSource a sourceRef resolved through.
	dataSource *types.NamespacedName
	pvc        *corev1.PersistentVolumeClaim
	run        *pipelinev1.TaskRun
	// failed is set when the import failed for good.
	failed string
	// clone is set for a pvc source: Clone phases instead of Import ones;
	// upload for an upload source: Upload phases.
	clone, upload bool
	// progress is what the running import reported ("45.20%").
	progress string
	// sourcePending says why a clone has not started: its source claim is
	// still being populated (by its own DataVolume).
	sourcePending string
	// restored is set for a snapshot source whose claim the CSI driver
	// has restored (it is bound): there is no run.
	restored bool
}

// CloneSourceNotPopulatedReason is why a clone waits: as CDI's, until its
// source claim's DataVolume has Succeeded.
const CloneSourceNotPopulatedReason = "CloneSourceNotPopulated"

// runState reads a TaskRun's Succeeded condition.
func runState(run *pipelinev1.TaskRun) (done, ok bool, msg string) {
	if run == nil {
		return false, false, ""
	}
	c := run.Status.GetCondition(apis.ConditionSucceeded)
	if c == nil || c.IsUnknown() {
		return false, false, ""
	}
	return true, c.IsTrue(), c.Message
}

// pullFailed is the message of a run whose step image the kubelet could
// not pull, or "": Tekton's PullImageFailed while the run waits, then
// TaskRunImagePullFailed when it gives up (the import is retried).
func pullFailed(run *pipelinev1.TaskRun) string {
	if run == nil {
		return ""
	}
	c := run.Status.GetCondition(apis.ConditionSucceeded)
	switch {
	case c == nil:
		return ""
	case c.IsUnknown() && c.Reason == "PullImageFailed", c.IsFalse() && c.Reason == pipelinev1.TaskRunReasonImagePullFailed.String():
		return c.Message
	}
	return ""
}

// podRefused is why the API server refuses a waiting run's Pod (a
// ResourceQuota, an admission webhook or policy), with the reason CDI
// reports for its importer Pod ("ErrExceededQuota"), or "", "".
func podRefused(run *pipelinev1.TaskRun) (reason, msg string) {
	if run == nil {
		return "", ""
	}
	c := run.Status.GetCondition(apis.ConditionSucceeded)
	if c == nil || !c.IsUnknown() {
		return "", ""
	}
	switch c.Reason {
	case "ExceededResourceQuota":
		return ErrExceededQuotaReason, c.Message
	case "PodAdmissionFailed":
		return c.Reason, c.Message
	}
	return "", ""
}

func podRefusedReason(run *pipelinev1.TaskRun) string {
	reason, _ := podRefused(run)
	return reason
}

// ErrExceededQuotaReason is CDI's reason for an import whose Pod a
// ResourceQuota refuses.
const ErrExceededQuotaReason = "ErrExceededQuota"

// nextStatus computes the DataVolume status; the reconciler patches it.
func nextStatus(dv *cdiv1.DataVolume, obs observed, now metav1.Time) cdiv1.DataVolumeStatus {
	st := *dv.Status.DeepCopy()
	if obs.pvc != nil {
		st.ClaimName = obs.pvc.Name
	}
	bound := obs.pvc != nil && obs.pvc.Status.Phase == corev1.ClaimBound
	switch {
	case obs.invalid != nil:
		st.Phase = cdiv1.Failed
		setCond(&st, cdiv1.DataVolumeReady, corev1.ConditionFalse, "UnsupportedSource", obs.invalid.Error(), now)
		return st
	case obs.waiting != "":
		st.Phase = cdiv1.Pending
		setCond(&st, cdiv1.DataVolumeReady, corev1.ConditionFalse, "DataSourceNotReady", obs.waiting, now)
		return st
	case obs.pvc == nil && obs.sourcePending != "":
		st.Phase = cdiv1.CloneScheduled
		setCond(&st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, CloneSourceNotPopulatedReason, obs.sourcePending, now)
		setCond(&st, cdiv1.DataVolumeReady, corev1.ConditionFalse, CloneSourceNotPopulatedReason, obs.sourcePending, now)
		return st
	case !bound:
		st.Phase = cdiv1.Pending
		setCond(&st, cdiv1.DataVolumeBound, corev1.ConditionFalse, "Pending", "PVC "+dv.Name+" Pending", now)
		setCond(&st, cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "", now)
		return st
	}
	setCond(&st, cdiv1.DataVolumeBound, corev1.ConditionTrue, "Bound", "PVC "+obs.pvc.Name+" Bound", now)
	runStatus(&st, dv, obs, now)
	return st
}

// runStatus sets the phase, progress and conditions of a DataVolume whose
// claim is bound, from its run.
func runStatus(st *cdiv1.DataVolumeStatus, dv *cdiv1.DataVolume, obs observed, now metav1.Time) {
	done, ok, msg := runState(obs.run)
	scheduled, inProgress := phases(obs)
	switch {
	case dv.Status.Phase == cdiv1.Succeeded:
		// Done for good; the run may be gone.
		st.Progress = "100.0%"
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "", now)
	case obs.failed != "":
		st.Phase = cdiv1.Failed
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Error", obs.failed, now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionFalse, "Error", obs.failed, now)
	case obs.restored:
		st.Phase, st.Progress = cdiv1.Succeeded, "100.0%"
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Completed", "Clone Complete", now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "", now)
	case done && ok:
		st.Phase, st.Progress = cdiv1.Succeeded, "100.0%"
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Completed", "Import Complete", now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionTrue, "", "", now)
	case pullFailed(obs.run) != "":
		// As CDI reports an importer Pod whose image cannot be pulled.
		st.Phase = scheduled
		msg := pullFailed(obs.run)
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, ImagePullFailedReason, msg, now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionFalse, ImagePullFailedReason, msg, now)
	case podRefusedReason(obs.run) != "":
		st.Phase = scheduled
		reason, msg := podRefused(obs.run)
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, reason, msg, now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionFalse, reason, msg, now)
	case done:
		// Failed, and a new run is being started.
		st.Phase = inProgress
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "Error", fmt.Sprintf("import failed, retrying: %s", msg), now)
	case obs.run != nil && obs.run.Status.StartTime != nil:
		st.Phase = inProgress
		if obs.progress != "" {
			st.Progress = cdiv1.DataVolumeProgress(obs.progress)
		} else if st.Progress == "" {
			st.Progress = "N/A"
		}
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionTrue, "Pod is running", "", now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionFalse, "", "", now)
	case obs.run == nil && obs.sourcePending != "":
		st.Phase = scheduled
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, CloneSourceNotPopulatedReason, obs.sourcePending, now)
		setCond(st, cdiv1.DataVolumeReady, corev1.ConditionFalse, CloneSourceNotPopulatedReason, obs.sourcePending, now)
	default:
		st.Phase = scheduled
		setCond(st, cdiv1.DataVolumeRunning, corev1.ConditionFalse, "", "", now)
	}
}

// phases are the phases of a scheduled and a running import, clone or upload.
func phases(obs observed) (scheduled, inProgress cdiv1.DataVolumePhase) {
	switch {
	case obs.clone:
		return cdiv1.CloneScheduled, cdiv1.CloneInProgress
	case obs.upload && obs.progress == "":
		return cdiv1.UploadScheduled, cdiv1.UploadScheduled
	case obs.upload:
		// The upload step is ready once it answers (its progress).
		return cdiv1.UploadScheduled, cdiv1.UploadReady
	}
	return cdiv1.ImportScheduled, cdiv1.ImportInProgress
}

func setCond(st *cdiv1.DataVolumeStatus, t cdiv1.DataVolumeConditionType, s corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	var prev *cdiv1.ConditionState
	i := slices.IndexFunc(st.Conditions, func(c cdiv1.DataVolumeCondition) bool { return c.Type == t })
	if i >= 0 {
		old := st.Conditions[i]
		prev = &cdiv1.ConditionState{Status: old.Status, Reason: old.Reason, Message: old.Message,
			LastTransitionTime: old.LastTransitionTime, LastHeartbeatTime: old.LastHeartbeatTime}
	}
	n := conditions.Next(prev, s, reason, msg, now)
	c := cdiv1.DataVolumeCondition{Type: t, Status: n.Status, Reason: n.Reason, Message: n.Message,
		LastTransitionTime: n.LastTransitionTime, LastHeartbeatTime: n.LastHeartbeatTime}
	if i >= 0 {
		st.Conditions[i] = c
	} else {
		st.Conditions = append(st.Conditions, c)
	}
}
