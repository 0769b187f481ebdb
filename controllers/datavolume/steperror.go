package datavolume

import (
	"strings"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"

	"github.com/tekvirt/tekvirt/contracts/datastep"
)

// StepError is why run's step failed, as the step left it in its error
// result (datastep.ErrorResult), or "" when it did not. Reading it from
// the TaskRun, rather than the pod's log, spares the controller the right
// to read every namespace's pod logs.
func StepError(run *pipelinev1.TaskRun) string {
	for _, r := range run.Status.Results {
		if r.Name == datastep.ErrorResult {
			return strings.TrimSpace(r.Value.StringVal)
		}
	}
	return ""
}
