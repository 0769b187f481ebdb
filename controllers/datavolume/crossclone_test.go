package datavolume

import (
	"strings"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/upload"
)

func TestSendRun(t *testing.T) {
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "mine", Name: "disk", UID: "0123456789abcdef"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "golden", Name: "fedora"}}}}
	if !crossNamespace(dv) || !Receives(dv) {
		t.Fatal("a pvc source in another namespace is a clone across namespaces, received as an upload")
	}
	task := &pipelinev1.Task{Spec: pipelinev1.TaskSpec{
		Workspaces: []pipelinev1.WorkspaceDeclaration{{Name: "source"}, {Name: "target"}},
		Params:     pipelinev1.ParamSpecs{{Name: "size"}},
		Steps:      []pipelinev1.Step{{Name: "clone", Args: []string{"--target-dir=$(workspaces.target.path)"}}},
	}}
	run := sendRun(dv, task, "https://10.96.0.9:443/v1beta1/upload", "cdi-uploadproxy.tekvirt-system.svc")
	if run.Namespace != "golden" || run.Name != "mine-disk-01234567-send-0" || run.Labels[CloneTargetNamespaceLabel] != "mine" || run.Labels[CloneTargetNameLabel] != "disk" ||
		run.Labels[CloneTargetUIDLabel] != "0123456789abcdef" {
		t.Errorf("run %s/%s labels %v", run.Namespace, run.Name, run.Labels)
	}
	spec := run.Spec.TaskSpec
	if len(spec.Workspaces) != 1 || len(run.Spec.Workspaces) != 1 || run.Spec.Workspaces[0].PersistentVolumeClaim.ClaimName != "fedora" || !run.Spec.Workspaces[0].PersistentVolumeClaim.ReadOnly {
		t.Errorf("workspaces %+v / %+v", spec.Workspaces, run.Spec.Workspaces)
	}
	args := strings.Join(spec.Steps[0].Args, " ")
	if strings.Contains(args, "target") || !strings.Contains(args, "--send-url=https://10.96.0.9:443/v1beta1/upload") {
		t.Errorf("args %s", args)
	}
	// The token is in the Secret named as the run, never in the run; the run
	// waits until that Secret is there.
	if env := spec.Steps[0].Env; len(env) != 1 || env[0].Name != upload.TokenEnv || env[0].Value != "" ||
		env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef.Name != run.Name || env[0].ValueFrom.SecretKeyRef.Key != sendTokenKey {
		t.Errorf("env %+v", env)
	}
	if run.Spec.Status != pipelinev1.TaskRunSpecStatusPending {
		t.Errorf("run created %q, want pending", run.Spec.Status)
	}
	if task.Spec.Steps[0].Args[0] != "--target-dir=$(workspaces.target.path)" {
		t.Error("sendRun changed the catalog task")
	}
	long := dv.DeepCopy()
	long.Namespace = strings.Repeat("n", 40)
	long.Name = strings.Repeat("d", 40)
	if name := sendRunName(long, 12); len(name) > 63 || !strings.HasSuffix(name, "-01234567-send-12") {
		t.Errorf("long name %q (%d)", name, len(name))
	}
}

func TestStepError(t *testing.T) {
	run := &pipelinev1.TaskRun{}
	if got := StepError(run); got != "" {
		t.Errorf("StepError of a run without results = %q", got)
	}
	run.Status.Results = []pipelinev1.TaskRunResult{
		{Name: "format", Value: *pipelinev1.NewStructuredValues("qcow2")},
		{Name: "error", Value: *pipelinev1.NewStructuredValues("importing http://x/d.qcow2: checksum mismatch\n")},
	}
	if got := StepError(run); got != "importing http://x/d.qcow2: checksum mismatch" {
		t.Errorf("StepError = %q", got)
	}
}
