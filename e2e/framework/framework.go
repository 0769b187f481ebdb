package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tekvirt/tekvirt/e2e/cluster"
)

// CatalogNamespace is where the default HyperConverged installs the catalog.
const CatalogNamespace = "tekvirt"

// Framework holds clients of the running cluster.
type Framework struct {
	Config     *rest.Config
	Kube       kubernetes.Interface
	Tekton     tektonclient.Interface
	Kubeconfig string
	// Home is $TEKVIRT_HOME, holding bin/tkn and bin/kubectl.
	Home string
}

// Home returns $TEKVIRT_HOME or its default.
func Home() string {
	if h := os.Getenv("TEKVIRT_HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return filepath.Join(h, ".tekvirt")
}

// New connects to the cluster `tekvirt up` started, or fails the test
// saying how to start it.
func New(t testing.TB) *Framework {
	t.Helper()
	home := Home()
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(home, "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("no cluster: %v (run `go run ./cmd/tekvirt up` first)", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	f := &Framework{Config: cfg, Kubeconfig: kubeconfig, Home: home}
	if f.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if f.Tekton, err = tektonclient.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 5 * time.Second
	dc, err := kubernetes.NewForConfig(probe)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Discovery().ServerVersion(); err != nil {
		t.Fatalf("cluster at %s not reachable: %v (run `go run ./cmd/tekvirt up` first)", cfg.Host, err)
	}
	return f
}

// Namespace creates a namespace for the test and deletes it afterwards
// unless the test failed (kept for inspection).
func (f *Framework) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := f.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-", Labels: map[string]string{"tekvirt.io/e2e": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating test namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping namespace %s of the failed test", ns.Name)
			return
		}
		_ = f.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// Bin is the path of a user binary `tekvirt up` installed (tkn, kubectl).
func (f *Framework) Bin(name string) string { return filepath.Join(f.Home, "bin", name) }

// Virtctl is KubeVirt's own virtctl, which `make virtctl` builds from
// KubeVirt's source: $TEKVIRT_VIRTCTL, else _output/bin/virtctl of the
// repository the tests run in.
func Virtctl(t testing.TB) string {
	t.Helper()
	p := os.Getenv("TEKVIRT_VIRTCTL")
	if p == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for ; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "e2e", "tools", "virtctl", "go.mod")); err == nil {
				break
			}
			if dir == filepath.Dir(dir) {
				t.Fatal("not in tekvirt's repository: set TEKVIRT_VIRTCTL")
			}
		}
		p = filepath.Join(dir, "_output", "bin", "virtctl")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("KubeVirt's virtctl is not built (make virtctl): %v", err)
	}
	return p
}

// Eventually polls cond every interval until it returns nil or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// WaitPodSucceeded waits for a pod to succeed and fails the test at once if
// it fails, naming its container states.
func (f *Framework) WaitPodSucceeded(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "pod "+ns+"/"+name+" Succeeded", func() error {
		p, err := f.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod %s/%s failed: %+v", ns, name, p.Status.ContainerStatuses)
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
}

// GuestDir is where `up` left the guest's disk images as files
// (cluster.Cluster.GuestDir).
func (f *Framework) GuestDir() string { return (&cluster.Cluster{Home: f.Home}).GuestDir() }

// KubeletRoot is the node's kubelet root directory, where Pods' volumes are.
func (f *Framework) KubeletRoot() string { return (&cluster.Cluster{Home: f.Home}).KubeletRoot() }
