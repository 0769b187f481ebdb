package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/pipelines"
	"github.com/tekvirt/tekvirt/tasks"
)

// Publication says how a rendered catalog is published.
type Publication struct {
	// StepImage is the step image, by digest.
	StepImage string
	// Version is the catalog's version: each task's and pipeline's folder
	// and its app.kubernetes.io/version label.
	Version string
	// Provider and Maintainers are Artifact Hub's provider and maintainers.
	Provider    string
	Maintainers []Maintainer
	// HubRepository is the catalog's repository name on Artifact Hub, which
	// recommendations between tasks and pipelines link to.
	HubRepository string
}

// Maintainer is one of Artifact Hub's maintainers entries.
type Maintainer struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// Artifact Hub's annotations (its Tekton annotations) and the category
// every task and pipeline here is in.
const (
	ProviderAnnotation        = "artifacthub.io/provider"
	MaintainersAnnotation     = "artifacthub.io/maintainers"
	RecommendationsAnnotation = "artifacthub.io/recommendations"
	CategoryAnnotation        = "artifacthub.io/category"
	VersionLabel              = "app.kubernetes.io/version"
	category                  = "integration-delivery"
)

var (
	digestRef = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)
	version   = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?$`)
)

func (p Publication) check() error {
	var errs []error
	if !digestRef.MatchString(p.StepImage) {
		errs = append(errs, fmt.Errorf("step image %q is not pinned by digest", p.StepImage))
	}
	if !version.MatchString(p.Version) {
		errs = append(errs, fmt.Errorf("version %q is not MAJOR.MINOR[.PATCH]", p.Version))
	}
	if p.Provider == "" || len(p.Maintainers) == 0 || p.HubRepository == "" {
		errs = append(errs, errors.New("provider, maintainers and the Artifact Hub repository are required"))
	}
	for _, m := range p.Maintainers {
		if m.Name == "" || !strings.Contains(m.Email, "@") {
			errs = append(errs, fmt.Errorf("maintainer %+v needs a name and an email", m))
		}
	}
	return errors.Join(errs...)
}

// Render writes the catalog in the tektoncd/catalog layout into dir:
// task/<name>/<version>/ with <name>.yaml (the Task, its step image
// p.StepImage), <name>-rbac.yaml (its ServiceAccount, ClusterRole and a
// RoleBinding of the two), README.md and samples/; pipeline/<name>/<version>/
// likewise (the RBAC file binds the pipeline's ServiceAccount to its tasks'
// ClusterRoles, which the tasks' files hold); and artifacthub-repo.yml.
// Each file applies with `kubectl apply -n NS -f` into any namespace: the
// bindings name no namespace, so their subjects are in theirs.
func Render(dir string, p Publication) error {
	if err := p.check(); err != nil {
		return fmt.Errorf("publishing the catalog: %w", err)
	}
	ts, err := Tasks()
	if err != nil {
		return err
	}
	ps, err := Pipelines()
	if err != nil {
		return err
	}
	pkgs, err := p.packages(ts, ps)
	if err != nil {
		return err
	}
	for _, pk := range pkgs {
		if err := p.writePackage(dir, pk); err != nil {
			return err
		}
	}
	repo, err := yaml.Marshal(map[string]any{"owners": p.Maintainers})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "artifacthub-repo.yml"), repo, 0o644)
}

// pkg is one task or pipeline as published: its manifest (annotated),
// its RBAC file's objects (after header) and where its README.md and
// samples/ are.
type pkg struct {
	kind, name string
	manifest   *unstructured.Unstructured
	rbac       []*unstructured.Unstructured
	header     string
	src        fs.FS
}

// packages are the catalog's tasks and pipelines as published; a task
// recommends the pipelines that run it, a pipeline its tasks.
func (p Publication) packages(ts []Task, ps []Pipeline) ([]pkg, error) {
	usedBy := map[string][]string{}
	for _, pl := range ps {
		for _, t := range pl.Tasks {
			usedBy[t.Name] = append(usedBy[t.Name], p.hubURL("tekton-pipeline", pl.Name))
		}
	}
	var out []pkg
	for _, t := range ts {
		task, err := resolve(t.Manifest, p.StepImage)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		if err := p.annotate(task, usedBy[t.Name]); err != nil {
			return nil, err
		}
		sa := t.ServiceAccount()
		out = append(out, pkg{kind: "task", name: t.Name, manifest: task, src: tasks.FS,
			rbac: []*unstructured.Unstructured{serviceAccount(sa, ""), t.ClusterRole, roleBinding(sa, "", t.ClusterRole.GetName(), sa, "")}})
	}
	for _, pl := range ps {
		m := pl.Manifest.DeepCopy()
		var recommended []string
		for _, t := range pl.Tasks {
			recommended = append(recommended, p.hubURL("tekton-task", t.Name))
		}
		if err := p.annotate(m, recommended); err != nil {
			return nil, err
		}
		// The ServiceAccount and its bindings in its own namespace: the
		// catalog cannot know which namespace that is, so bindings in the
		// pipeline's further namespaces are the user's to make.
		pk := pkg{kind: "pipeline", name: pl.Name, manifest: m, src: pipelines.FS, rbac: pipelineObjects(pl, "")[:1+len(pl.Tasks)]}
		if ns := pl.Namespaces(); len(ns) > 0 {
			pk.header = fmt.Sprintf("# %s also works in %s: bind the same ClusterRoles there to this ServiceAccount\n"+
				"# (kubectl create rolebinding NAME -n %s --clusterrole ROLE --serviceaccount NS:%s).\n",
				pl.Name, strings.Join(ns, ", "), ns[0], pl.ServiceAccount())
		}
		out = append(out, pk)
	}
	return out, nil
}

func (p Publication) hubURL(kind, name string) string {
	return "https://artifacthub.io/packages/" + kind + "/" + p.HubRepository + "/" + name
}

// annotate sets the version label and Artifact Hub's annotations on o.
func (p Publication) annotate(o *unstructured.Unstructured, recommended []string) error {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[VersionLabel] = p.Version
	o.SetLabels(labels)
	maintainers, err := yaml.Marshal(p.Maintainers)
	if err != nil {
		return err
	}
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[ProviderAnnotation] = p.Provider
	a[MaintainersAnnotation] = string(maintainers)
	a[CategoryAnnotation] = category
	if len(recommended) > 0 {
		var recs []map[string]string
		for _, u := range recommended {
			recs = append(recs, map[string]string{"url": u})
		}
		data, err := yaml.Marshal(recs)
		if err != nil {
			return err
		}
		a[RecommendationsAnnotation] = string(data)
	}
	o.SetAnnotations(a)
	return nil
}

// writePackage writes kind/name/version/: the manifest, the RBAC file
// (header first), and the README.md and samples/ of the package's source.
func (p Publication) writePackage(dir string, pk pkg) error {
	out := filepath.Join(dir, pk.kind, pk.name, p.Version)
	if err := os.MkdirAll(filepath.Join(out, "samples"), 0o755); err != nil {
		return err
	}
	if err := writeYAML(filepath.Join(out, pk.name+".yaml"), "", pk.manifest); err != nil {
		return err
	}
	if err := writeYAML(filepath.Join(out, pk.name+"-rbac.yaml"), pk.header, pk.rbac...); err != nil {
		return err
	}
	return fs.WalkDir(pk.src, pk.name, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(f, pk.name+"/")
		if rel != "README.md" && path.Dir(rel) != "samples" {
			return nil
		}
		data, err := fs.ReadFile(pk.src, f)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, filepath.FromSlash(rel)), data, 0o644)
	})
}

func writeYAML(file, header string, objs ...*unstructured.Unstructured) error {
	docs := make([]string, 0, len(objs))
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		docs = append(docs, string(data))
	}
	return os.WriteFile(file, []byte(header+strings.Join(docs, "---\n")), 0o644)
}
