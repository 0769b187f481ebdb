package claimimport

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"knative.dev/pkg/apis"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// The annotations CDI writes on a claim it imports into (the pod phase is
// the one the DataVolume controller writes on its claims too).
const (
	AnnPodPhase       = datavolume.AnnPodPhase
	AnnImportPodName  = "cdi.kubevirt.io/storage.import.importPodName"
	AnnPodRestarts    = "cdi.kubevirt.io/storage.pod.restarts"
	AnnRunning        = "cdi.kubevirt.io/storage.condition.running"
	AnnRunningReason  = "cdi.kubevirt.io/storage.condition.running.reason"
	AnnRunningMessage = "cdi.kubevirt.io/storage.condition.running.message"
)

// Annotations are what CDI's annotations say of an import whose run is run
// (nil: not made yet) or that could not start (invalid).
func Annotations(run *pipelinev1.TaskRun, invalid error) map[string]string {
	phase, running, reason, msg := corev1.PodPending, false, "Pending", ""
	podName := ""
	switch {
	case invalid != nil:
		phase, reason, msg = corev1.PodFailed, "Error", invalid.Error()
	case run != nil:
		podName = run.Status.PodName
		c := run.Status.GetCondition(apis.ConditionSucceeded)
		switch {
		case c == nil || c.Status == corev1.ConditionUnknown && podName == "":
			if c != nil {
				msg = c.Message
			}
		case c.Status == corev1.ConditionUnknown:
			phase, running, reason, msg = corev1.PodRunning, true, "", c.Message
		case c.Status == corev1.ConditionTrue:
			phase, reason, msg = corev1.PodSucceeded, "Completed", "Import Complete"
		default:
			phase, reason, msg = corev1.PodFailed, "Error", c.Message
		}
	}
	return map[string]string{
		AnnPodPhase: string(phase), AnnImportPodName: podName, AnnPodRestarts: "0",
		AnnRunning: fmt.Sprint(running), AnnRunningReason: reason, AnnRunningMessage: msg,
	}
}
