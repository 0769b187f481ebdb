package tekvirt_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// layerRules keeps the architecture of design.md honest: a package under
// the prefix may not import (directly or not) any package with a banned prefix.
var layerRules = []struct {
	pkgPrefix string
	banned    []string
	why       string
}{
	{"github.com/tekvirt/tekvirt/images", []string{"k8s.io/", "sigs.k8s.io/", "github.com/tektoncd/", "libvirt.org/"}, "images/ is a pure disk image library"},
	{"github.com/tekvirt/tekvirt/runtime", []string{"github.com/tektoncd/", "github.com/tekvirt/tekvirt/e2e"}, "the node runtime knows no Tekton and no testbed"},
	{"github.com/tekvirt/tekvirt/runtime/migration", []string{"libvirt.org/", "sigs.k8s.io/", "k8s.io/client-go"}, "the migration proxy is sockets between Pods' loopbacks: the handler carries streams, libvirt stays in the launchers"},
	{"github.com/tekvirt/tekvirt/tasks", []string{"github.com/tekvirt/tekvirt/controllers", "github.com/tekvirt/tekvirt/e2e", "github.com/tekvirt/tekvirt/runtime"}, "task steps depend only on images/ and client libraries"},
	{"github.com/tekvirt/tekvirt/controllers", []string{"github.com/tekvirt/tekvirt/e2e", "github.com/tekvirt/tekvirt/runtime", "libvirt.org/"}, "reconcilers create runs, they do no node or data work"},
	{"github.com/tekvirt/tekvirt/controllers", []string{"github.com/tekvirt/tekvirt/tasks/"}, "what a controller shares with a task is a contract package"},
	{"github.com/tekvirt/tekvirt/contracts", []string{"github.com/tekvirt/tekvirt/", "sigs.k8s.io/controller-runtime", "k8s.io/client-go", "libvirt.org/", "github.com/tektoncd/"}, "a contract is a leaf both sides import"},
	{"github.com/tekvirt/tekvirt/catalog", []string{"github.com/tekvirt/tekvirt/controllers", "github.com/tekvirt/tekvirt/e2e"}, "catalog is data"},
	// Every program a release ships, the tekvirt CLI included: it hands its
	// testbed commands (up, down, ...) to e2e/cmd/tekvirt-testbed.
	{"github.com/tekvirt/tekvirt/cmd/", []string{"github.com/tekvirt/tekvirt/e2e"}, "production code never imports the testbed"},
	// "cmd/tekvirt/" matches no other program (cmd/tekvirt-controller, ...).
	{"github.com/tekvirt/tekvirt/cmd/tekvirt/", []string{"github.com/tektoncd/", "go.opentelemetry.io/", "google.golang.org/grpc", "k8s.io/client-go/kubernetes/typed/", "k8s.io/client-go/applyconfigurations/"}, "the CLI users download talks to the API (a controller-runtime client, no typed clientset of every API group) and runs no controller: built for each platform the downloads server offers, its size is build time"},
}

type goPackage struct {
	ImportPath string
	Deps       []string
}

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		for _, r := range layerRules {
			if !strings.HasPrefix(p.ImportPath+"/", r.pkgPrefix) {
				continue
			}
			checked++
			for _, d := range p.Deps {
				for _, b := range r.banned {
					if strings.HasPrefix(d, b) {
						t.Errorf("%s imports %s: %s", p.ImportPath, d, r.why)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package matched any layer rule")
	}
}

// TestNoTaskImportsAnother: a task (a tasks/ folder with a task.yaml)
// imports no other task; what two share is a contract package, or one of
// tasks/' helpers (kube, result, step), which are not tasks.
func TestNoTaskImportsAnother(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,Deps", "./tasks/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Dir string
		Deps            []string
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	isTask := map[string]bool{}
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(p.Dir, "task.yaml")); err == nil {
			isTask[p.ImportPath] = true
		}
	}
	if len(isTask) < 5 {
		t.Fatalf("found only %d tasks", len(isTask))
	}
	for _, p := range pkgs {
		for _, d := range p.Deps {
			if isTask[p.ImportPath] && isTask[d] {
				t.Errorf("task %s imports task %s", p.ImportPath, d)
			}
		}
	}
}

// TestEveryPackageHasDoc makes every package carry a doc.go.
func TestEveryPackageHasDoc(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}} {{.Name}} {{range .GoFiles}}{{.}} {{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if f[1] == "main" {
			continue
		}
		has := false
		for _, g := range f[2:] {
			has = has || g == "doc.go"
		}
		if !has {
			t.Errorf("package %s (%s) has no doc.go", f[1], f[0])
		}
	}
}
