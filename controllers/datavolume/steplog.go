package datavolume

import (
	"bufio"
	"context"
	"strings"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// StepLogs reads the tail of a step's log, for the cause of a failure.
type StepLogs struct {
	Kube kubernetes.Interface
}

// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get

// Cause is the error line the failed step of run printed last ("error:
// ..." from tekvirt-step), or "" when there is none to read.
func (l *StepLogs) Cause(ctx context.Context, run *pipelinev1.TaskRun) string {
	if l == nil || l.Kube == nil || run.Status.PodName == "" {
		return ""
	}
	for _, s := range run.Status.Steps {
		if s.Terminated == nil || s.Terminated.ExitCode == 0 {
			continue
		}
		tail := int64(20)
		b, err := l.Kube.CoreV1().Pods(run.Namespace).GetLogs(run.Status.PodName, &corev1.PodLogOptions{Container: s.Container, TailLines: &tail}).DoRaw(ctx)
		if err != nil {
			return ""
		}
		return lastError(string(b))
	}
	return ""
}

// lastError is the last "error: " line of log, without the prefix.
func lastError(log string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		if msg, ok := strings.CutPrefix(sc.Text(), "error: "); ok {
			last = msg
		}
	}
	return last
}
