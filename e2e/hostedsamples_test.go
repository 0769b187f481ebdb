package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// hostedSampleNamespace is where the hosted-cluster samples put the control
// plane (and the access Secrets).
const hostedSampleNamespace = "clusters-sample"

// hostedSampleOrder is the order the hosted-cluster tasks build a control
// plane in, as provision-hosted-cluster runs them.
var hostedSampleOrder = []string{"pki", "etcd", "control-plane", "access", "wait", "bootstrap"}

// TestHostedSamplesRun: the samples of the six hosted-cluster tasks, run as
// written (releaseImage the install's) in their order on a fresh
// clusters-sample namespace bound as provision-hosted-cluster's README says,
// make a control plane whose admin kubeconfig lists the hosted cluster's
// namespaces; provision-hosted-cluster's sample then runs over it and
// succeeds, keeping the identities it found (the cluster CA is the same).
func TestHostedSamplesRun(t *testing.T) {
	heavy(t, "1.5 minutes of a hosted control plane")
	t.Parallel() // long and mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	ctx := context.Background()
	ns := hostedSampleNamespace
	namespaces := f.Kube.CoreV1().Namespaces()
	if err := namespaces.Delete(ctx, ns, metav1.DeleteOptions{}); err == nil { // an earlier run's
		framework.WaitGone(t, f.VMClient(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, 3*time.Minute)
	}
	if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"tekvirt.io/e2e": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = namespaces.Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	for _, task := range hostedSampleOrder {
		role := "hosted-cluster-" + task + "-task"
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.CatalogNamespace, Name: role},
				{Kind: rbacv1.ServiceAccountKind, Namespace: framework.CatalogNamespace, Name: "provision-hosted-cluster-pipeline"}}}
		if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := f.Kube.CoreV1().ConfigMaps("tekvirt-system").Get(ctx, "tekvirt-hosted-release", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release := cm.Data["image"]

	start := time.Now()
	for _, task := range hostedSampleOrder {
		var tr pipelinev1.TaskRun
		readSample(t, filepath.Join("../tasks", "hosted-cluster-"+task, "samples", "taskrun.yaml"), &tr)
		tr.Namespace = framework.CatalogNamespace
		setParam(tr.Spec.Params, "releaseImage", release)
		r := framework.NewTaskRunRunner(t, f, &tr).WithTimeout(10 * time.Minute).CreateTaskRun()
		t.Cleanup(func() {
			_ = f.Tekton.TektonV1().TaskRuns(tr.Namespace).Delete(context.Background(), r.TaskRun().Name, metav1.DeleteOptions{})
		})
		r.ExpectSuccess()
		t.Logf("hosted-cluster-%s sample: %s", task, r.Elapsed.Round(100*time.Millisecond))
		if task == "wait" && !strings.HasPrefix(r.Results()["version"], "v1.") {
			t.Errorf("hosted-cluster-wait sample: results %v, want a version", r.Results())
		}
	}
	t.Logf("the six task samples: %s", time.Since(start).Round(time.Second))
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	secret, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, "sample-admin-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, secret.Data["kubeconfig"], 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(f, f.Bin("kubectl"), "--kubeconfig", kc, "get", "namespaces", "-o", "name"); err != nil || !strings.Contains(out, "namespace/kube-system") {
		t.Errorf("kubectl get namespaces on the sample's hosted cluster: %v\n%s", err, out)
	}
	caBefore := sampleClusterCA(t, f)

	var pr pipelinev1.PipelineRun
	readSample(t, "../pipelines/provision-hosted-cluster/samples/pipelinerun.yaml", &pr)
	pr.Namespace = framework.CatalogNamespace
	setParam(pr.Spec.Params, "releaseImage", release)
	start = time.Now()
	runPipelineSample(t, f, &pr, 10*time.Minute)
	t.Logf("provision-hosted-cluster sample over them: %s", time.Since(start).Round(100*time.Millisecond))
	if !bytes.Equal(sampleClusterCA(t, f), caBefore) {
		t.Errorf("the pipeline sample re-made the cluster CA the task samples made")
	}
}

// readSample decodes the sample at path into obj, refusing unknown fields.
func readSample(t *testing.T, path string, obj any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sampleClusterCA is the cluster CA certificate hosted-cluster-pki keeps in
// the sample's control-plane namespace.
func sampleClusterCA(t *testing.T, f *framework.Framework) []byte {
	t.Helper()
	s, err := f.Kube.CoreV1().Secrets(hostedSampleNamespace).Get(context.Background(), "control-plane-pki", metav1.GetOptions{})
	if err != nil || len(s.Data["ca.crt"]) == 0 {
		t.Fatalf("Secret %s/control-plane-pki: %v", hostedSampleNamespace, err)
	}
	return s.Data["ca.crt"]
}
