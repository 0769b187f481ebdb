package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// run runs a command with KUBECONFIG set to the infrastructure cluster's
// and returns its combined output and error.
func run(f *framework.Framework, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig, "PATH="+filepath.Dir(f.Bin("kubectl"))+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHostedClusterControlPlane: `tekvirt create cluster kubevirt` with its
// defaults (release image from the install, HighlyAvailable as `hcp`'s and
// the CRD's default) makes a HostedCluster the controller provisions with
// the provision-hosted-cluster PipelineRun: three etcd members, API
// servers, controller managers and schedulers spread over the nodes; it
// becomes Available with HyperShift's status; the access Secrets work
// exactly as the docs use them (kubectl and base64, `tekvirt create
// kubeconfig`, the kubeadmin password as a cluster-admin bearer token);
// the hosted API answers throughout the loss of an etcd Pod and an API
// server Pod, and hosted data survives; a namespace editor cannot read the
// control plane; destroy leaves nothing.
func TestHostedClusterControlPlane(t *testing.T) {
	heavy(t, "2-3 minutes of a hosted control plane")
	t.Parallel() // long and mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	const name = "hc"
	cpNS := ns + "-" + name
	dir := t.TempDir()
	pullSecret := pullSecretFile(t)
	start := time.Now()
	tekvirt(t, f, "create", "cluster", "kubevirt", "--name", name, "--namespace", ns, "--pull-secret", pullSecret,
		"--node-pool-replicas", "0")
	t.Cleanup(func() {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &hyperv1.HostedCluster{}); apierrors.IsNotFound(err) {
			return
		}
		if out, err := run(f, f.Bin("tekvirt"), "destroy", "cluster", "kubevirt", "--name", name, "--namespace", ns); err != nil {
			t.Logf("cleanup: %v\n%s", err, out)
		}
	})
	cm, err := f.Kube.CoreV1().ConfigMaps("tekvirt-system").Get(ctx, "tekvirt-hosted-release", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &hyperv1.HostedCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
		t.Fatal(err)
	}
	if hc.Spec.Release.Image != cm.Data["image"] || !strings.Contains(hc.Spec.Release.Image, "@sha256:") {
		t.Errorf("release image %q, want the install's %q (by digest)", hc.Spec.Release.Image, cm.Data["image"])
	}

	framework.Eventually(t, 8*time.Minute, "HostedCluster Available", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(hc), hc); err != nil {
			return err
		}
		av := meta.FindStatusCondition(hc.Status.Conditions, string(hyperv1.HostedClusterAvailable))
		if av == nil || av.Status != metav1.ConditionTrue {
			pr := meta.FindStatusCondition(hc.Status.Conditions, string(hyperv1.HostedClusterProgressing))
			if dg := meta.FindStatusCondition(hc.Status.Conditions, string(hyperv1.HostedClusterDegraded)); dg != nil && dg.Status == metav1.ConditionTrue {
				t.Fatalf("HostedCluster Degraded: %s: %s", dg.Reason, dg.Message)
			}
			return fmt.Errorf("available %v; progressing %v", av, pr)
		}
		return nil
	})
	t.Logf("HostedCluster Available %s after create", time.Since(start).Round(time.Second))
	wantPodSecurity(t, f, cpNS, "baseline") // no override annotation
	if hc.Status.KubeConfig == nil || hc.Status.KubeConfig.Name != name+"-admin-kubeconfig" ||
		hc.Status.KubeadminPassword == nil || hc.Status.KubeadminPassword.Name != name+"-kubeadmin-password" {
		t.Errorf("status access secrets %+v %+v", hc.Status.KubeConfig, hc.Status.KubeadminPassword)
	}
	if v := hc.Status.Version; v == nil || len(v.History) != 1 || v.History[0].State != configv1.CompletedUpdate ||
		!strings.HasPrefix(v.History[0].Version, "v1.") || v.Desired.Image != hc.Spec.Release.Image {
		t.Errorf("status.version %+v", v)
	}
	if hc.Status.ControlPlaneEndpoint.Host == "" || hc.Status.ControlPlaneEndpoint.Port != 6443 {
		t.Errorf("controlPlaneEndpoint %+v", hc.Status.ControlPlaneEndpoint)
	}
	runs, err := f.Tekton.TektonV1().PipelineRuns(cpNS).List(ctx, metav1.ListOptions{})
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("PipelineRuns in %s: %v %v", cpNS, err, runs)
	}
	if got := runs.Items[0].Status.ChildReferences; len(got) != 6 {
		t.Errorf("the provisioning run ran %d tasks, want pki, etcd, control-plane, access, wait, bootstrap", len(got))
	}

	// docs/hosted-clusters.md's way to the hosted cluster: kubectl and
	// base64, then `tekvirt create kubeconfig`, which prints the same.
	env := []string{"CLUSTER_NAME=" + name, "CLUSTER_NAMESPACE=" + ns}
	mustRunExample(t, f, docexample.Find(t, "hosted-access"), dir, env, "No resources found")
	kc := filepath.Join(dir, name+".kubeconfig")
	out, err := run(f, f.Bin("kubectl"), "--kubeconfig", kc, "get", "namespaces", "-o", "name")
	if err != nil || !strings.Contains(out, "namespace/kube-system") {
		t.Errorf("kubectl get namespaces on the hosted cluster: %v\n%s", err, out)
	}
	saved, err := os.ReadFile(kc)
	if printed, err2 := os.ReadFile(filepath.Join(dir, name+"-printed.kubeconfig")); err != nil || err2 != nil || len(saved) == 0 || !bytes.Equal(saved, printed) {
		t.Errorf("tekvirt create kubeconfig differs from the Secret's kubeconfig (%v, %v)", err, err2)
	}

	// The kubeadmin password is the bearer token of a cluster-admin.
	pw, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, name+"-kubeadmin-password", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("https://%s:%d", hc.Status.ControlPlaneEndpoint.Host, hc.Status.ControlPlaneEndpoint.Port)
	asKubeadmin := func(token string, args ...string) (string, error) {
		return run(f, f.Bin("kubectl"), append([]string{"--kubeconfig", "/dev/null", "--server", server, "--insecure-skip-tls-verify", "--token", token}, args...)...)
	}
	out, err = asKubeadmin(string(pw.Data["password"]), "auth", "whoami")
	if err != nil || !strings.Contains(out, "kubeadmin") || !strings.Contains(out, "system:masters") {
		t.Errorf("kubectl auth whoami with the kubeadmin password: %v\n%s", err, out)
	}
	out, err = asKubeadmin(string(pw.Data["password"]), "auth", "can-i", "*", "*", "--all-namespaces")
	if err != nil || strings.TrimSpace(out) != "yes" {
		t.Errorf("kubeadmin is not cluster-admin: %v %s", err, out)
	}
	if out, err = asKubeadmin("wrong-password", "get", "namespaces"); err == nil || !strings.Contains(out, "Unauthorized") {
		t.Errorf("a wrong password was accepted: %v %s", err, out)
	}

	checkHighlyAvailable(t, f, cpNS)

	// The hosted API answers while an etcd member and an API server go
	// away; hosted data lives on etcd's PVCs and survives its Pod.
	if out, err := run(f, f.Bin("kubectl"), "--kubeconfig", kc, "create", "configmap", "survivor", "-n", "default", "--from-literal=k=v"); err != nil {
		t.Fatalf("creating a hosted ConfigMap: %v\n%s", err, out)
	}
	stop := pollHostedAPI(t, server, string(pw.Data["password"]))
	var gone []*corev1.Pod
	for _, sel := range []string{"app=etcd", "app=" + hostedcluster.APIServerDeployment} {
		pods, err := f.Kube.CoreV1().Pods(cpNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("Pods %s in %s: %v %d", sel, cpNS, err, len(pods.Items))
		}
		gone = append(gone, &pods.Items[0])
		if err := f.Kube.CoreV1().Pods(cpNS).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 3*time.Minute, "the deleted Pods replaced, every replica ready, the ConfigMap still there", func() error {
		for _, p := range gone {
			if _, err := f.Kube.CoreV1().Pods(cpNS).Get(ctx, p.Name, metav1.GetOptions{}); err == nil && p.Labels["app"] != "etcd" {
				return fmt.Errorf("pod %s still there", p.Name)
			}
		}
		if err := controlPlaneReady(ctx, f, cpNS, 3); err != nil {
			return err
		}
		out, err := run(f, f.Bin("kubectl"), "--kubeconfig", kc, "get", "configmap", "survivor", "-n", "default", "-o", "jsonpath={.data.k}")
		if err != nil || out != "v" {
			return fmt.Errorf("reading the ConfigMap: %w %s", err, out)
		}
		return nil
	})
	if p, err := f.Kube.CoreV1().Pods(cpNS).Get(ctx, gone[0].Name, metav1.GetOptions{}); err != nil || p.UID == gone[0].UID {
		t.Errorf("etcd Pod %s not replaced: %v", gone[0].Name, err)
	}
	if n, failed := stop(); len(failed) > 0 {
		t.Errorf("the hosted API failed %d of %d requests while a member and an API server went away: %v", len(failed), n, failed)
	} else {
		t.Logf("the hosted API answered all %d requests while etcd Pod %s and API server Pod %s were replaced", n, gone[0].Name, gone[1].Name)
	}

	// A namespace editor of the HostedCluster's namespace cannot read the
	// control plane's secrets nor exec into it.
	bindUser(t, f, ns, "hc-editor", "edit")
	for _, attempt := range [][]string{
		{"get", "secret", "control-plane-pki", "-n", cpNS},
		{"get", "secret", "admin-kubeconfig", "-n", cpNS},
		{"exec", "-n", cpNS, "etcd-0", "--", "/usr/bin/etcd", "--version"},
	} {
		out, err := run(f, f.Bin("kubectl"), append([]string{"--as", "hc-editor"}, attempt...)...)
		if err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("editor of %s: kubectl %v: %v %s", ns, attempt, err, out)
		}
	}

	// destroy waits until everything is gone: namespace, access Secrets, etcd's volume.
	out = mustRunExample(t, f, docexample.Find(t, "hosted-destroy"), dir, env)
	if !strings.Contains(out, "gone") {
		t.Errorf("destroy output:\n%s", out)
	}
	if _, err := f.Kube.CoreV1().Namespaces().Get(ctx, cpNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after destroy: %v", cpNS, err)
	}
	// The access Secrets are the HostedCluster's (owner references): the
	// garbage collector takes them once it is gone.
	framework.Eventually(t, time.Minute, "access Secrets gone", func() error {
		for _, s := range []string{name + "-admin-kubeconfig", name + "-kubeadmin-password"} {
			if _, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, s, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("secret %s after destroy: %w", s, err)
			}
		}
		return nil
	})
	framework.Eventually(t, time.Minute, "etcd's volume released", func() error {
		pvs, err := f.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == cpNS {
				return fmt.Errorf("PV %s of %s/%s is %s", pv.Name, ref.Namespace, ref.Name, pv.Status.Phase)
			}
		}
		return nil
	})
}
