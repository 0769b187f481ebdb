package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/catalog"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// The release's two files, as KubeVirt's kubevirt-operator.yaml and
// kubevirt-cr.yaml.
const (
	ReleaseOperatorFile = "tekvirt-operator.yaml"
	ReleaseCRFile       = "tekvirt-cr.yaml"
)

// Release builds every image, pushes it to registry and writes the release
// into dir: ReleaseOperatorFile (the task roles and what
// ctrlconfig.Files holds: namespaces, CRDs, RBAC, admission policies and
// the operator, every image by digest) and ReleaseCRFile (the
// HyperConverged). `kubectl apply --server-side -f` of both installs
// tekvirt on a cluster with Tekton Pipelines.
func (c *Cluster) Release(ctx context.Context, registry, dir string) error {
	images, err := c.buildAndPush(ctx, registry)
	if err != nil {
		return err
	}
	return renderRelease(images, dir)
}

// buildAndPush builds every binary and image and pushes the images to
// registry.
func (c *Cluster) buildAndPush(ctx context.Context, registry string) (Images, error) {
	bins, err := c.buildAll(ctx)
	if err != nil {
		return nil, err
	}
	return c.pushImages(ctx, bins, registry)
}

// Catalog builds the step image, pushes every image to registry, renders
// the catalog into dir (catalog.Render), its step image by digest, and
// pushes each task and pipeline as a Tekton bundle to
// <registry>/tekvirt/bundles/<name>:<version>.
func (c *Cluster) Catalog(ctx context.Context, registry, dir string, p catalog.Publication) error {
	images, err := c.buildAndPush(ctx, registry)
	if err != nil {
		return err
	}
	p.StepImage = images[tekvirtModule+"/cmd/tekvirt-step"]
	if err := clearRendered(dir); err != nil { // a task removed since must not linger
		return err
	}
	if err := catalog.Render(dir, p); err != nil {
		return err
	}
	bundles, err := catalog.PushBundles(registry, p)
	if err != nil {
		return err
	}
	c.progress("%-24s rendered into %s; %d bundles pushed to %s/%s", "catalog "+p.Version, dir, len(bundles), registry, catalog.BundleRepository)
	return nil
}

// clearRendered removes dir if it is missing, empty or an earlier
// rendered catalog, and refuses any other: --out . must not delete a tree.
func clearRendered(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacthub-repo.yml")); len(entries) > 0 && err != nil {
		return fmt.Errorf("refusing to replace %s: it holds files and no rendered catalog (artifacthub-repo.yml)", dir)
	}
	return os.RemoveAll(dir)
}

// renderRelease writes the release's files for images into dir.
func renderRelease(images Images, dir string) error {
	var docs []string
	roles, err := catalog.ClusterRoles()
	if err != nil {
		return err
	}
	for _, r := range roles {
		data, err := yaml.Marshal(r.Object)
		if err != nil {
			return err
		}
		docs = append(docs, string(data))
	}
	for _, f := range ctrlconfig.Files {
		data, err := fs.ReadFile(ctrlconfig.FS, f)
		if err != nil {
			return err
		}
		resolved, err := images.Resolve(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		docs = append(docs, "# "+f+"\n"+strings.TrimPrefix(strings.TrimSpace(resolved), "---\n"))
	}
	cr, err := fs.ReadFile(ctrlconfig.FS, ctrlconfig.DefaultHyperConverged)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReleaseOperatorFile), []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ReleaseCRFile), cr, 0o644)
}
