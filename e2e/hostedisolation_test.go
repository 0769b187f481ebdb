package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestHostedClustersIsolated: two hosted clusters side by side, each in
// its own namespace. Neither one's provisioning ServiceAccount may read
// the other's control-plane namespace (Secrets, etcd's volumes, worker
// VMs, exec), while it may read its own; neither one's admin kubeconfig
// nor kubeadmin password is accepted by the other's API server.
func TestHostedClustersIsolated(t *testing.T) {
	heavy(t, "2-3 minutes of two hosted control planes")
	t.Parallel() // long and mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	pullSecret := pullSecretFile(t)
	type cluster struct{ ns, name, cp, kubeconfig, password string }
	clusters := []*cluster{{ns: f.Namespace(t), name: "iso-a"}, {ns: f.Namespace(t), name: "iso-b"}}
	for _, cl := range clusters {
		cl.cp = cl.ns + "-" + cl.name
		tekvirt(t, f, "create", "cluster", "kubevirt", "--name", cl.name, "--namespace", cl.ns, "--pull-secret", pullSecret,
			// The one scenario of the SingleReplica policy (two clusters at once).
			"--node-pool-replicas", "0", "--control-plane-availability-policy", "SingleReplica")
		t.Cleanup(func() {
			if out, err := run(f, f.Bin("tekvirt"), "destroy", "cluster", "kubevirt", "--name", cl.name, "--namespace", cl.ns); err != nil {
				t.Logf("cleanup: %v\n%s", err, out)
			}
		})
	}
	dir := t.TempDir()
	for _, cl := range clusters {
		hc := &hyperv1.HostedCluster{}
		framework.Eventually(t, 8*time.Minute, "HostedCluster "+cl.name+" Available", func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: cl.name}, hc); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(hc.Status.Conditions, string(hyperv1.HostedClusterAvailable)) {
				return fmt.Errorf("conditions %v", hc.Status.Conditions)
			}
			return nil
		})
		kc, err := f.Kube.CoreV1().Secrets(cl.ns).Get(ctx, cl.name+"-admin-kubeconfig", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cl.kubeconfig = filepath.Join(dir, cl.name+".kubeconfig")
		if err := os.WriteFile(cl.kubeconfig, kc.Data["kubeconfig"], 0o600); err != nil {
			t.Fatal(err)
		}
		pw, err := f.Kube.CoreV1().Secrets(cl.ns).Get(ctx, cl.name+"-kubeadmin-password", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cl.password = string(pw.Data["password"])
	}

	canI := func(as, verb, resource, ns string) string {
		out, _ := run(f, f.Bin("kubectl"), "auth", "can-i", verb, resource, "-n", ns, "--as", as)
		return strings.TrimSpace(out)
	}
	for i, self := range clusters {
		other := clusters[1-i]
		sa := "system:serviceaccount:" + self.cp + ":provision-hosted-cluster-pipeline"
		if got := canI(sa, "get", "secrets", self.cp); got != "yes" {
			t.Errorf("%s get secrets in its own %s: %q, want yes (else the checks below prove nothing)", sa, self.cp, got)
		}
		for _, a := range [][2]string{{"get", "secrets"}, {"list", "secrets"}, {"get", "persistentvolumeclaims"}, {"create", "datavolumes.cdi.kubevirt.io"},
			{"create", "datavolumes.cdi.kubevirt.io/source"}, {"get", "virtualmachines.kubevirt.io"}, {"create", "pods/exec"}, {"create", "pods"}} {
			if got := canI(sa, a[0], a[1], other.cp); got != "no" {
				t.Errorf("%s may %s %s in the other cluster's %s: %q", sa, a[0], a[1], other.cp, got)
			}
		}
		if got := canI(sa, "get", "secrets", other.ns); got != "no" {
			t.Errorf("%s may read Secrets in %s (the other cluster's access Secrets): %q", sa, other.ns, got)
		}

		// self's credentials against other's API server (other's CA, so TLS
		// verifies and only the client is in question).
		server, ca := serverOf(t, other.kubeconfig, dir)
		for what, args := range map[string][]string{
			"admin kubeconfig":   {"--kubeconfig", self.kubeconfig, "--server", server, "--certificate-authority", ca},
			"kubeadmin password": {"--kubeconfig", "/dev/null", "--server", server, "--certificate-authority", ca, "--token", self.password},
		} {
			out, err := run(f, f.Bin("kubectl"), append(args, "get", "secrets", "-A")...)
			// 401: kubectl says "Unauthorized" or asks for credentials.
			refused := strings.Contains(out, "Unauthorized") || strings.Contains(out, "provide credentials")
			if err == nil || !refused {
				t.Errorf("%s's %s against %s's API server: %v %s", self.name, what, other.name, err, out)
			}
		}
		// The same credentials work against their own (the check can pass).
		if out, err := run(f, f.Bin("kubectl"), "--kubeconfig", self.kubeconfig, "get", "namespaces"); err != nil {
			t.Errorf("%s's admin kubeconfig against its own API server: %v %s", self.name, err, out)
		}
	}
}

// serverOf is the API server URL of a kubeconfig and its CA, written to a
// file in dir.
func serverOf(t *testing.T, kubeconfig, dir string) (server, caPath string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, cl := range cfg.Clusters {
		caPath = filepath.Join(dir, name+"-ca.crt")
		if err := os.WriteFile(caPath, cl.CertificateAuthorityData, 0o600); err != nil {
			t.Fatal(err)
		}
		return cl.Server, caPath
	}
	t.Fatalf("%s names no cluster", kubeconfig)
	return "", ""
}
