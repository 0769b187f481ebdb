package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// pipelineSampleOrder is the order TestPipelineSamplesRun runs the pipeline
// samples in: template-creation's starts from golden-image's DataSource.
// provision-hosted-cluster's runs in TestHostedSamplesRun.
var pipelineSampleOrder = []string{"vm-test", "golden-image", "template-creation"}

// TestPipelineSamplesRun runs every pipeline sample as written, in the
// catalog namespace (golden-image's url is the test guest's): each
// PipelineRun succeeds, and what they publish is deleted after.
func TestPipelineSamplesRun(t *testing.T) {
	heavy(t, "4-6 minutes (the same pipelines run in TestGoldenImagePipeline and TestTemplateCreationPipeline)")
	t.Parallel() // long and mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	found, err := filepath.Glob("../pipelines/*/samples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	byPipeline := map[string]string{}
	for _, s := range found {
		p := filepath.Base(filepath.Dir(filepath.Dir(s)))
		if p == "provision-hosted-cluster" {
			continue
		}
		byPipeline[p] = s
	}
	if len(byPipeline) != len(pipelineSampleOrder) {
		t.Fatalf("pipeline samples %v, want one for each of %v", found, pipelineSampleOrder)
	}
	t.Cleanup(func() {
		cleanGolden(c, "sample-guest")
		cleanTemplateCreation(c, framework.CatalogNamespace, "sample-guest-customized")
	})
	guestURL := serveGuest(t, f) + "/guest.qcow2.xz"
	for _, p := range pipelineSampleOrder {
		if byPipeline[p] == "" {
			t.Fatalf("pipeline %s has no sample", p)
		}
		var pr pipelinev1.PipelineRun
		readSample(t, byPipeline[p], &pr)
		pr.Namespace = framework.CatalogNamespace
		for i := range pr.Spec.Params {
			if p == "golden-image" && pr.Spec.Params[i].Name == "url" {
				pr.Spec.Params[i].Value = *pipelinev1.NewStructuredValues(guestURL)
			}
		}
		start := time.Now()
		runPipelineSample(t, f, &pr, 10*time.Minute)
		t.Logf("%s sample: %s", p, time.Since(start).Round(100*time.Millisecond))
	}
}

// runPipelineSample creates pr and fails the test unless it succeeds in
// timeout, naming its failed TaskRuns.
func runPipelineSample(t *testing.T, f *framework.Framework, pr *pipelinev1.PipelineRun, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	cond := finishPipelineRun(t, f, pr, timeout)
	if cond.IsTrue() {
		return
	}
	var b strings.Builder
	for _, ref := range pr.Status.ChildReferences {
		tr, err := f.Tekton.TektonV1().TaskRuns(pr.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if c := tr.Status.GetCondition(apis.ConditionSucceeded); c != nil && c.IsFalse() {
			fmt.Fprintf(&b, "task %s (TaskRun %s): %s: %s\n", ref.PipelineTaskName, tr.Name, c.Reason, c.Message)
		}
	}
	t.Fatalf("PipelineRun %s/%s: %s: %s\n%s", pr.Namespace, pr.Name, cond.Reason, cond.Message, b.String())
}

// expectPipelineFailure creates pr and returns the message it failed with,
// failing the test if it succeeds.
func expectPipelineFailure(t *testing.T, f *framework.Framework, pr *pipelinev1.PipelineRun, timeout time.Duration) string {
	t.Helper()
	cond := finishPipelineRun(t, f, pr, timeout)
	if cond.IsTrue() {
		t.Fatalf("PipelineRun %s/%s succeeded, want a failure", pr.Namespace, pr.Name)
	}
	return cond.Message
}

// finishPipelineRun creates pr, waits up to timeout until it ends, leaves
// its last state in pr and returns its Succeeded condition.
func finishPipelineRun(t *testing.T, f *framework.Framework, pr *pipelinev1.PipelineRun, timeout time.Duration) *apis.Condition {
	t.Helper()
	ctx := context.Background()
	runs := f.Tekton.TektonV1().PipelineRuns(pr.Namespace)
	created, err := runs.Create(ctx, pr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a PipelineRun of %v: %v", pr.Spec.PipelineRef, err)
	}
	cond := waitPipelineRunDone(t, f, created.Namespace, created.Name, timeout)
	done, err := runs.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	*pr = *done
	return cond
}
