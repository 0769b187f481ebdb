package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
