package catalog_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/catalog"
)

var testPublication = catalog.Publication{
	StepImage: testImage, Version: "0.3", Provider: "tekvirt", HubRepository: "tekvirt",
	Maintainers: []catalog.Maintainer{{Name: "tekvirt developers", Email: "dev@tekvirt.test"}},
}

// readDocs decodes the YAML documents of file.
func readDocs(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(o.Object) > 0 {
			docs = append(docs, o)
		}
	}
}

// contents are the catalog's tasks and pipelines.
func contents(t *testing.T) ([]catalog.Task, []catalog.Pipeline) {
	t.Helper()
	ts, err := catalog.Tasks()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := catalog.Pipelines()
	if err != nil {
		t.Fatal(err)
	}
	return ts, ps
}

// TestRenderFollowsCatalogConventions renders the catalog and checks each
// task and pipeline as the Tekton catalog's linter would (the catalog
// annotations, a version label matching its folder, a description for the
// resource and every param, images by digest), Artifact Hub's metadata, the
// README and samples beside it, and an RBAC file that binds the
// ServiceAccount its annotation names to its role in whatever namespace it
// is applied.
func TestRenderFollowsCatalogConventions(t *testing.T) {
	dir := t.TempDir()
	if err := catalog.Render(dir, testPublication); err != nil {
		t.Fatal(err)
	}
	ts, ps := contents(t)
	type pkg struct {
		kind, name, sa string
		roles          []string
	}
	var pkgs []pkg
	for _, task := range ts {
		pkgs = append(pkgs, pkg{"task", task.Name, task.ServiceAccount(), []string{task.ClusterRole.GetName()}})
	}
	for _, p := range ps {
		var roles []string
		for _, task := range p.Tasks {
			roles = append(roles, task.ClusterRole.GetName())
		}
		pkgs = append(pkgs, pkg{"pipeline", p.Name, p.ServiceAccount(), roles})
	}
	for _, p := range pkgs {
		folder := filepath.Join(dir, p.kind, p.name, testPublication.Version)
		file := filepath.Join(folder, p.name+".yaml")
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &meta); err != nil {
			t.Fatal(err)
		}
		var description string
		var params pipelinev1.ParamSpecs
		if p.kind == "task" {
			var task pipelinev1.Task
			decodeSample(t, file, &task)
			description, params = task.Spec.Description, task.Spec.Params
			for _, s := range task.Spec.Steps {
				if !strings.Contains(s.Image, "@sha256:") || strings.HasSuffix(s.Image, ":latest") {
					t.Errorf("%s: step %s image %q is not pinned by digest", file, s.Name, s.Image)
				}
			}
		} else {
			var pl pipelinev1.Pipeline
			decodeSample(t, file, &pl)
			description, params = pl.Spec.Description, pl.Spec.Params
		}
		if description == "" {
			t.Errorf("%s: no description", file)
		}
		for _, param := range params {
			if param.Description == "" {
				t.Errorf("%s: param %s has no description", file, param.Name)
			}
		}
		if meta.Metadata.Name != p.name || meta.Metadata.Labels[catalog.VersionLabel] != testPublication.Version {
			t.Errorf("%s: name %q, version label %q, want %s and its folder's %s", file, meta.Metadata.Name, meta.Metadata.Labels[catalog.VersionLabel], p.name, testPublication.Version)
		}
		a := meta.Metadata.Annotations
		for _, k := range []string{"tekton.dev/pipelines.minVersion", "tekton.dev/categories", "tekton.dev/tags", "tekton.dev/displayName", "tekton.dev/platforms", catalog.CategoryAnnotation} {
			if a[k] == "" {
				t.Errorf("%s: no annotation %s", file, k)
			}
		}
		var maintainers []catalog.Maintainer
		if err := yaml.UnmarshalStrict([]byte(a[catalog.MaintainersAnnotation]), &maintainers); err != nil || len(maintainers) != 1 || a[catalog.ProviderAnnotation] != "tekvirt" {
			t.Errorf("%s: Artifact Hub provider %q, maintainers %q (%v)", file, a[catalog.ProviderAnnotation], a[catalog.MaintainersAnnotation], err)
		}
		var recs []struct {
			URL string `json:"url"`
		}
		if err := yaml.UnmarshalStrict([]byte(a[catalog.RecommendationsAnnotation]), &recs); err != nil {
			t.Errorf("%s: recommendations: %v", file, err)
		}
		if p.kind == "pipeline" && len(recs) != len(p.roles) {
			t.Errorf("%s: %d recommendations, want one per task (%d)", file, len(recs), len(p.roles))
		}
		for _, r := range recs {
			if !strings.HasPrefix(r.URL, "https://artifacthub.io/packages/tekton-") {
				t.Errorf("%s: recommendation %q", file, r.URL)
			}
		}
		if _, err := os.Stat(filepath.Join(folder, "README.md")); err != nil {
			t.Error(err)
		}
		if samples, _ := filepath.Glob(filepath.Join(folder, "samples", "*.yaml")); len(samples) == 0 {
			t.Errorf("%s has no samples", folder)
		}
		checkRBAC(t, filepath.Join(folder, p.name+"-rbac.yaml"), p.kind, p.sa, p.roles)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacthub-repo.yml")); err != nil {
		t.Error(err)
	}
}

// checkRBAC: the file holds the ServiceAccount sa (and, for a task, its
// ClusterRole) and one RoleBinding per role to sa, naming no namespace.
func checkRBAC(t *testing.T, file, kind, sa string, roles []string) {
	t.Helper()
	bound := map[string]bool{}
	var sas, clusterRoles int
	for _, o := range readDocs(t, file) {
		if o.GetNamespace() != "" {
			t.Errorf("%s: %s %s names namespace %s", file, o.GetKind(), o.GetName(), o.GetNamespace())
		}
		switch o.GetKind() {
		case "ServiceAccount":
			sas++
			if o.GetName() != sa {
				t.Errorf("%s: ServiceAccount %s, want %s", file, o.GetName(), sa)
			}
		case "ClusterRole":
			clusterRoles++
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &rb); err != nil {
				t.Fatal(err)
			}
			if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != rbacv1.ServiceAccountKind || rb.Subjects[0].Name != sa || rb.Subjects[0].Namespace != "" {
				t.Errorf("%s: RoleBinding %s subjects %+v, want only %s of the binding's namespace", file, rb.Name, rb.Subjects, sa)
			}
			bound[rb.RoleRef.Name] = true
		default:
			t.Errorf("%s: unexpected %s", file, o.GetKind())
		}
	}
	wantRoles := 0
	if kind == "task" {
		wantRoles = 1
	}
	if sas != 1 || clusterRoles != wantRoles || len(bound) != len(roles) {
		t.Errorf("%s: %d ServiceAccounts, %d ClusterRoles, bindings to %v; want 1, %d, %v", file, sas, clusterRoles, bound, wantRoles, roles)
	}
	for _, r := range roles {
		if !bound[r] {
			t.Errorf("%s: no RoleBinding to %s", file, r)
		}
	}
}

func TestRenderRefusesAnUnpinnedPublication(t *testing.T) {
	for name, change := range map[string]func(*catalog.Publication){
		"a tag":            func(p *catalog.Publication) { p.StepImage = "registry.test/tekvirt-step:latest" },
		"no version":       func(p *catalog.Publication) { p.Version = "" },
		"a version word":   func(p *catalog.Publication) { p.Version = "latest" },
		"no maintainer":    func(p *catalog.Publication) { p.Maintainers = nil },
		"a maintainer bad": func(p *catalog.Publication) { p.Maintainers[0].Email = "nobody" },
	} {
		p := testPublication
		p.Maintainers = append([]catalog.Maintainer(nil), p.Maintainers...)
		change(&p)
		dir := t.TempDir()
		if err := catalog.Render(dir, p); err == nil {
			t.Errorf("%s: rendered", name)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: wrote %d entries", name, len(entries))
		}
	}
}
