package framework

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"
)

// TaskRunRunner creates one TaskRun and checks what became of it.
type TaskRunRunner struct {
	t       testing.TB
	f       *Framework
	tr      *pipelinev1.TaskRun
	timeout time.Duration
	// creator creates the TaskRun; the framework's admin client unless As.
	creator tektonclient.Interface
	// Elapsed is create -> completion, set by the Expect calls that wait.
	Elapsed time.Duration
	created time.Time
}

// NewTaskRunRunner prepares tr for creation.
func NewTaskRunRunner(t testing.TB, f *Framework, tr *pipelinev1.TaskRun) *TaskRunRunner {
	return &TaskRunRunner{t: t, f: f, tr: tr, timeout: 3 * time.Minute, creator: f.Tekton}
}

// As creates the TaskRun with c (another user's client); the runner still
// watches it as admin.
func (r *TaskRunRunner) As(c tektonclient.Interface) *TaskRunRunner {
	r.creator = c
	return r
}

// WithTimeout bounds the wait for completion.
func (r *TaskRunRunner) WithTimeout(d time.Duration) *TaskRunRunner {
	r.timeout = d
	return r
}

// CreateTaskRun creates the TaskRun.
func (r *TaskRunRunner) CreateTaskRun() *TaskRunRunner {
	r.t.Helper()
	r.created = time.Now()
	tr, err := r.creator.TektonV1().TaskRuns(r.tr.Namespace).Create(context.Background(), r.tr, metav1.CreateOptions{})
	if err != nil {
		r.t.Fatalf("creating TaskRun: %v", err)
	}
	r.tr = tr
	return r
}

// TaskRun is the latest copy of the TaskRun.
func (r *TaskRunRunner) TaskRun() *pipelinev1.TaskRun { return r.tr }

// wait waits for completion and returns the Succeeded condition.
func (r *TaskRunRunner) wait() *apis.Condition {
	r.t.Helper()
	deadline := time.Now().Add(r.timeout)
	for {
		tr, err := r.f.Tekton.TektonV1().TaskRuns(r.tr.Namespace).Get(context.Background(), r.tr.Name, metav1.GetOptions{})
		if err == nil {
			r.tr = tr
			if c := tr.Status.GetCondition(apis.ConditionSucceeded); c != nil && !c.IsUnknown() {
				r.Elapsed = time.Since(r.created)
				return c
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("TaskRun %s/%s did not finish in %s\n%s", r.tr.Namespace, r.tr.Name, r.timeout, r.Describe())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ExpectSuccess waits and fails the test unless the TaskRun succeeded.
func (r *TaskRunRunner) ExpectSuccess() *TaskRunRunner {
	r.t.Helper()
	if c := r.wait(); !c.IsTrue() {
		r.t.Fatalf("TaskRun %s/%s failed: %s: %s\n%s", r.tr.Namespace, r.tr.Name, c.Reason, c.Message, r.Describe())
	}
	return r
}

// ExpectFailure waits and fails the test unless the TaskRun failed with a
// message or logs matching pattern.
func (r *TaskRunRunner) ExpectFailure(pattern string) *TaskRunRunner {
	r.t.Helper()
	c := r.wait()
	if c.IsTrue() {
		r.t.Fatalf("TaskRun %s/%s succeeded, want a failure matching %q\n%s", r.tr.Namespace, r.tr.Name, pattern, r.Describe())
	}
	re := regexp.MustCompile(pattern)
	if !re.MatchString(c.Message) && !re.MatchString(r.Logs()) {
		r.t.Fatalf("TaskRun %s/%s failed without naming the cause %q\n%s", r.tr.Namespace, r.tr.Name, pattern, r.Describe())
	}
	return r
}

// ExpectLogs fails the test unless the step logs match every pattern.
func (r *TaskRunRunner) ExpectLogs(patterns ...string) *TaskRunRunner {
	r.t.Helper()
	logs := r.Logs()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(logs) {
			r.t.Fatalf("TaskRun %s/%s logs do not match %q\n%s", r.tr.Namespace, r.tr.Name, p, r.Describe())
		}
	}
	return r
}

// Results returns the TaskRun's results by name.
func (r *TaskRunRunner) Results() map[string]string {
	out := map[string]string{}
	for _, res := range r.tr.Status.Results {
		out[res.Name] = res.Value.StringVal
	}
	return out
}

// Logs returns the logs of every step container of the TaskRun's pod.
func (r *TaskRunRunner) Logs() string {
	pod := r.tr.Status.PodName
	if pod == "" {
		return ""
	}
	var b strings.Builder
	for _, s := range r.tr.Status.Steps {
		fmt.Fprintf(&b, "--- step %s (container %s)\n", s.Name, s.Container)
		req := r.f.Kube.CoreV1().Pods(r.tr.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: s.Container})
		rc, err := req.Stream(context.Background())
		if err != nil {
			fmt.Fprintf(&b, "(no logs: %v)\n", err)
			continue
		}
		data, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
		rc.Close()
		b.Write(data)
	}
	return b.String()
}

// Describe renders the TaskRun's conditions, steps and logs for a failure message.
func (r *TaskRunRunner) Describe() string {
	var b strings.Builder
	for _, c := range r.tr.Status.Conditions {
		fmt.Fprintf(&b, "condition %s=%s reason=%s message=%q\n", c.Type, c.Status, c.Reason, c.Message)
	}
	for _, s := range r.tr.Status.Steps {
		if s.Terminated != nil {
			fmt.Fprintf(&b, "step %s terminated: %s exit %d\n", s.Name, s.Terminated.Reason, s.Terminated.ExitCode)
		} else if s.Waiting != nil {
			fmt.Fprintf(&b, "step %s waiting: %s %s\n", s.Name, s.Waiting.Reason, s.Waiting.Message)
		}
	}
	b.WriteString(r.Logs())
	return b.String()
}
