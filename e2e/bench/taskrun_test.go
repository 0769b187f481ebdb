package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

const runs = 5

func benchOnly(t *testing.T) *framework.Framework {
	t.Helper()
	if os.Getenv("TEKVIRT_BENCH") != "1" {
		t.Skip("set TEKVIRT_BENCH=1 (make bench)")
	}
	return framework.New(t)
}

// shellImage is the busybox image tekvirt up gave Tekton as its shell image
// (tekton-shell: busybox as a non-root user, as Tekton's release ships it).
func shellImage(t *testing.T, f *framework.Framework) string {
	d, err := f.Kube.AppsV1().Deployments("tekton-pipelines").Get(context.Background(), "tekton-pipelines-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	i := slices.Index(args, "-shell-image")
	if i < 0 || i+1 == len(args) || !strings.Contains(args[i+1], "/tekvirt/") {
		t.Fatalf("no shell image of tekvirt's in %v", args)
	}
	return args[i+1]
}

// trivialTaskRun runs `true` in busybox: the cost of any TaskRun.
func trivialTaskRun(image string) *pipelinev1.TaskRun {
	return &pipelinev1.TaskRun{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-trivial-", Namespace: framework.CatalogNamespace},
		Spec: pipelinev1.TaskRunSpec{TaskSpec: &pipelinev1.TaskSpec{Steps: []pipelinev1.Step{{
			Name: "true", Image: image, Command: []string{"true"},
		}}}},
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestTaskRunOverhead compares create -> Succeeded of generate-ssh-keys with
// a trivial one-step TaskRun, interleaved, median of 5 each.
func TestTaskRunOverhead(t *testing.T) {
	f := benchOnly(t)
	ns := framework.CatalogNamespace
	image := shellImage(t, f)
	ours := func() *pipelinev1.TaskRun {
		return &pipelinev1.TaskRun{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-ssh-", Namespace: ns},
			Spec: pipelinev1.TaskRunSpec{
				ServiceAccountName: "generate-ssh-keys-task",
				TaskRef:            &pipelinev1.TaskRef{Name: "generate-ssh-keys"},
			},
		}
	}
	var base, task []time.Duration
	for i := 0; i < runs; i++ {
		r := framework.NewTaskRunRunner(t, f, trivialTaskRun(image)).CreateTaskRun().ExpectSuccess()
		base = append(base, r.Elapsed)
		r = framework.NewTaskRunRunner(t, f, ours()).CreateTaskRun().ExpectSuccess()
		task = append(task, r.Elapsed)
		res := r.Results()
		for _, k := range []string{"publicKey", "privateKey"} {
			_ = f.Kube.CoreV1().Secrets(res[k+"SecretNamespace"]).Delete(context.Background(), res[k+"SecretName"], metav1.DeleteOptions{})
		}
	}
	mb, mt := median(base), median(task)
	t.Logf("trivial one-step TaskRun create->Succeeded: median %s of %v", mb, base)
	t.Logf("generate-ssh-keys TaskRun create->Succeeded: median %s of %v", mt, task)
	t.Logf("ratio generate-ssh-keys / trivial: %.2f (target <= 1.2)", float64(mt)/float64(mb))
}
