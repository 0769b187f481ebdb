package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// joinScript is the worker's "#!" user-data: the hosted CA and a bootstrap
// kubeconfig with the token, which the worker's init hands to kubelet.
func joinScript(server string, ca []byte, token string) string {
	return fmt.Sprintf(`#!/bin/sh
mkdir -p /etc/kubernetes/pki
cat > /etc/kubernetes/pki/ca.crt <<'END'
%s
END
cat > /etc/kubernetes/bootstrap-kubelet.conf <<'END'
apiVersion: v1
kind: Config
clusters: [{name: hosted, cluster: {server: "%s", certificate-authority: /etc/kubernetes/pki/ca.crt}}]
users: [{name: bootstrap, user: {token: "%s"}}]
contexts: [{name: hosted, context: {cluster: hosted, user: bootstrap}}]
current-context: hosted
END
`, strings.TrimSpace(string(ca)), server, token)
}

// bootstrapToken makes a node bootstrap token in the hosted cluster and
// the bindings kubeadm makes for it: bootstrappers may ask for a node
// client certificate, which the controller manager approves, and nodes
// may renew theirs.
func bootstrapToken(t *testing.T, hosted kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 11)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(b)
	id, secret := h[:6], h[6:22]
	_, err := hosted.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + id},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true",
			"auth-extra-groups": "system:bootstrappers:worker", "expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]struct{ role, group string }{
		"kubelet-bootstrap":                     {"system:node-bootstrapper", "system:bootstrappers"},
		"node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"},
		"node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		_, err := hosted.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: b.group}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return id + "." + secret
}

// TestHostedWorkerJoins: a tekvirt VM booting the hosted-worker
// containerDisk (Debian kernel, containerd, runc, CNI plugins, the
// testbed's kubelet), given a bootstrap token through cloud-init user-data,
// joins a hosted control plane as a Ready node named after the VM, and a
// Pod pinned to it runs.
func TestHostedWorkerJoins(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	const name = "hw"
	dir := t.TempDir()
	pullSecret := filepath.Join(dir, "pull-secret.json")
	if err := os.WriteFile(pullSecret, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tekvirt(t, f, "create", "cluster", "kubevirt", "--name", name, "--namespace", ns, "--pull-secret", pullSecret,
		"--node-pool-replicas", "0", "--control-plane-availability-policy", "SingleReplica")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping hosted cluster %s/%s of the failed test", ns, name)
			return
		}
		if out, err := run(f, f.Bin("tekvirt"), "destroy", "cluster", "kubevirt", "--name", name, "--namespace", ns); err != nil {
			t.Logf("cleanup: %v\n%s", err, out)
		}
	})
	hc := &hyperv1.HostedCluster{}
	framework.Eventually(t, 8*time.Minute, "HostedCluster kubeconfig", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
			return err
		}
		if hc.Status.KubeConfig == nil {
			return fmt.Errorf("no kubeconfig yet: %v", hc.Status.Conditions)
		}
		return nil
	})
	kcSecret, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, hc.Status.KubeConfig.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kcSecret.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	hosted := kubernetes.NewForConfigOrDie(cfg)
	token := bootstrapToken(t, hosted)

	start := time.Now()
	worker := name + "-worker-0"
	vm := framework.GuestVM(ns, worker, cluster.HostedWorkerImage, v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	spec.Volumes[1].CloudInitNoCloud.UserData = joinScript(cfg.Host, cfg.CAData, token)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 6*time.Minute, "node "+worker+" Ready in the hosted cluster", func() error {
		node, err := hosted.CoreV1().Nodes().Get(ctx, worker, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready: %v", worker, node.Status.Conditions)
	})
	t.Logf("worker VM created -> hosted node Ready: %s", time.Since(start).Round(time.Second))

	// A Pod pinned to the worker runs the pause image the worker carries
	// (no registry is reachable from the worker yet).
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-worker", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: worker, Containers: []corev1.Container{{
			Name: "pause", Image: "tekvirt.io/pause:latest", ImagePullPolicy: corev1.PullNever}}},
	}
	if _, err := hosted.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "hosted Pod Running on the worker", func() error {
		p, err := hosted.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s: %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
}
