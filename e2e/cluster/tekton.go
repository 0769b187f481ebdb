package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// tektonConfigFiles are the parts of Tekton's release config (config/ in its
// module) that the cluster installs: the pipelines controller and webhook
// with their CRDs, RBAC and config maps; not the events controller, the
// resolvers or the HPA.
var tektonConfigFiles = []string{
	"100-namespace/*.yaml", "200-*.yaml", "201-*.yaml", "300-crds/*.yaml", "500-webhooks.yaml",
	"clusterrole-aggregate-*.yaml", "config-*.yaml", "controller.yaml", "webhook.yaml",
}

// TektonNamespace is where Tekton Pipelines runs.
const TektonNamespace = "tekton-pipelines"

// tektonManifests reads Tekton's release config from the pinned module and
// points its images at the local registry.
func (c *Cluster) tektonManifests(images Images) ([]*unstructured.Unstructured, error) {
	m, err := c.toolModule(toolBuilds[1])
	if err != nil {
		return nil, err
	}
	configDir := filepath.Join(m.dir, "config")
	var objs []*unstructured.Unstructured
	for _, pattern := range tektonConfigFiles {
		files, err := filepath.Glob(filepath.Join(configDir, pattern))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("tekton config %s: no files in %s", pattern, configDir)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			resolved, err := images.Resolve(string(data))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			docs, err := ctrlconfig.Decode([]byte(resolved))
			if err != nil {
				return nil, fmt.Errorf("decoding %s: %w", f, err)
			}
			objs = append(objs, docs...)
		}
	}
	return objs, customize(objs, images[ShellImageKey])
}

// customize sets our shell image on the controller and turns off
// coschedule: clone-disk binds two PVCs to one TaskRun, which the affinity
// assistant forbids; on one node it places nothing anyway.
func customize(objs []*unstructured.Unstructured, shellImage string) error {
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == "tekton-pipelines-controller":
			if err := setShellImage(o, shellImage); err != nil {
				return err
			}
		case o.GetKind() == "ConfigMap" && o.GetName() == "feature-flags":
			if err := unstructured.SetNestedField(o.Object, "disabled", "data", "coschedule"); err != nil {
				return err
			}
		}
	}
	return nil
}

// setShellImage points the controller's -shell-image flag at our busybox.
func setShellImage(deploy *unstructured.Unstructured, image string) error {
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return fmt.Errorf("reading the tekton controller's containers: %w", err)
	}
	if len(containers) == 0 {
		return fmt.Errorf("tekton controller deployment has no containers")
	}
	ctr := containers[0].(map[string]any)
	args, _ := ctr["args"].([]any)
	found := false
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-shell-image" {
			args[i+1] = image
			found = true
		}
	}
	if !found {
		return fmt.Errorf("tekton controller deployment has no -shell-image argument")
	}
	ctr["args"] = args
	return unstructured.SetNestedSlice(deploy.Object, containers, "spec", "template", "spec", "containers")
}

// installTekton applies Tekton and waits for its controller and webhook.
func (c *Cluster) installTekton(ctx context.Context, a *applier, k *kube, images Images) error {
	objs, err := c.tektonManifests(images)
	if err != nil {
		return err
	}
	if err := a.apply(ctx, objs); err != nil {
		return fmt.Errorf("installing tekton: %w", err)
	}
	for _, d := range []string{"tekton-pipelines-controller", "tekton-pipelines-webhook"} {
		if err := k.waitDeployment(ctx, TektonNamespace, d); err != nil {
			return err
		}
	}
	return nil
}
