package dataimportcron

import (
	"fmt"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// pollTimeout bounds a digest poll; a registry that does not answer in it
// fails the poll, which the next schedule retries.
const pollTimeout = 5 * time.Minute

// pollRunName names the cron's digest poll run (one at a time).
func pollRunName(c *cdiv1.DataImportCron) string {
	const suffix = "-poll"
	name := c.Name
	if len(name) > 63-len(suffix) {
		name = name[:63-len(suffix)]
	}
	return name + suffix
}

// pollRun reads the digest of the cron's image: the catalog's import-disk
// task, inline, in digest-only mode, in the cron's namespace. The kubelet
// hands it the template's secretRef and certConfigMap, so the controller
// never reads a Secret of the cron's namespace.
func pollRun(c *cdiv1.DataImportCron, task *pipelinev1.Task) *pipelinev1.TaskRun {
	spec := task.Spec.DeepCopy()
	spec.Params, spec.Workspaces = nil, nil
	src := c.Spec.Template.Spec.Source
	step := &spec.Steps[0]
	step.Args = []string{"--registry=" + *src.Registry.URL, "--digest-only"}
	datavolume.SourceAccess(spec, src)
	return &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: pollRunName(c),
			Labels: map[string]string{CronLabel: c.Name, "app.kubernetes.io/part-of": "tekvirt"}},
		Spec: pipelinev1.TaskRunSpec{TaskSpec: spec, Timeout: &metav1.Duration{Duration: pollTimeout}},
	}
}

// pollOutcome is what a poll run found: the image's digest, or why it
// found none. done is false while the run has not finished.
func pollOutcome(c *cdiv1.DataImportCron, run *pipelinev1.TaskRun) (digest string, done bool, err error) {
	cond := run.Status.GetCondition(apis.ConditionSucceeded)
	if cond == nil || cond.IsUnknown() {
		return "", false, nil
	}
	url := *c.Spec.Template.Spec.Source.Registry.URL
	if cond.IsTrue() {
		for _, r := range run.Status.Results {
			if r.Name == "digest" && r.Value.StringVal != "" {
				return r.Value.StringVal, true, nil
			}
		}
		return "", true, fmt.Errorf("reading the digest of %s: TaskRun %s/%s succeeded without a digest result", url, run.Namespace, run.Name)
	}
	why := datavolume.StepError(run)
	if why == "" {
		why = cond.Message
	}
	return "", true, fmt.Errorf("reading the digest of %s (TaskRun %s/%s): %s", url, run.Namespace, run.Name, why)
}
