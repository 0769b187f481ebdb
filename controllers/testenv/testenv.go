package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Start runs an API server with the CRDs in crdPaths (files or folders) and
// stops it when the test ends.
func Start(t *testing.T, crdPaths ...string) *rest.Config {
	t.Helper()
	apiserver, etcd := binaries()
	if apiserver == "" || etcd == "" {
		msg := "no kube-apiserver under $TEKVIRT_HOME/cache/kubernetes-* or no /usr/bin/etcd: run `tekvirt up` once to build them"
		if os.Getenv("TEKVIRT_REQUIRE_TESTENV") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Setenv("TEST_ASSET_KUBE_APISERVER", apiserver)
	t.Setenv("TEST_ASSET_ETCD", etcd)
	env := &envtest.Environment{CRDDirectoryPaths: crdPaths, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting test API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping test API server: %v", err)
		}
	})
	return cfg
}

func binaries() (apiserver, etcd string) {
	home := os.Getenv("TEKVIRT_HOME")
	if home == "" {
		h, _ := os.UserHomeDir()
		home = filepath.Join(h, ".tekvirt")
	}
	dirs, _ := filepath.Glob(filepath.Join(home, "cache", "kubernetes-*", "kube-apiserver"))
	sort.Strings(dirs)
	if len(dirs) > 0 {
		apiserver = dirs[len(dirs)-1]
	}
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		etcd = "/usr/bin/etcd"
	}
	return apiserver, etcd
}

// ModuleDir returns the folder of a module in the main module's graph, to
// load CRDs shipped inside it (Tekton's).
func ModuleDir(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("locating module %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// StartManager runs a controller manager on cfg with the reconcilers setup
// registers, until the test ends, and returns a direct (uncached) client.
func StartManager(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, setup func(ctrl.Manager) error) client.Client {
	t.Helper()
	skip := true // every test runs its own manager with the same controller names
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Client is a direct client of cfg knowing the types adds register, for a
// test that calls its reconciler itself.
func Client(t *testing.T, cfg *rest.Config, adds ...func(*runtime.Scheme) error) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range adds {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Eventually polls cond until it returns nil, failing the test after 30 s.
func Eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for err := cond(); err != nil; err = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
