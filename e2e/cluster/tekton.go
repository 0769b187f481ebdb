package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// tektonConfigFiles are the parts of Tekton's release config (config/ in its
// module) that the cluster installs: the pipelines controller and webhook
// with their CRDs, RBAC and config maps, and the resolvers; not the events
// controller or the HPA.
var tektonConfigFiles = []string{
	"100-namespace/*.yaml", "200-*.yaml", "201-*.yaml", "300-crds/*.yaml", "500-webhooks.yaml",
	"clusterrole-aggregate-*.yaml", "config-*.yaml", "controller.yaml", "webhook.yaml", "resolvers/*.yaml",
}

// Where Tekton Pipelines and its resolvers run.
const (
	TektonNamespace    = "tekton-pipelines"
	ResolversNamespace = "tekton-pipelines-resolvers"
	resolversName      = "tekton-pipelines-remote-resolvers"
)

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
		docs, err := readManifests(files, images)
		if err != nil {
			return nil, err
		}
		objs = append(objs, docs...)
	}
	return objs, customize(objs, images[TektonShellImageKey])
}

// readManifests decodes the YAML files, their ko:// images resolved.
func readManifests(files []string, images Images) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
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
	return objs, nil
}

// customize sets our shell image on the controller and turns off
// coschedule: clone-disk binds two PVCs to one TaskRun, which the affinity
// assistant forbids; on one node it places nothing anyway. It turns on
// set-security-context, Tekton's switch for namespaces enforcing Pod
// Security "restricted": without it Tekton's own init containers are
// refused there, whatever the Task's steps say. The resolvers'
// image has no tini (Tekton's entrypoint there); the hub resolver, which
// asks a public hub, is off; the cluster resolver serves only the catalog
// namespace, as it reads with its own rights, not the asking user's: any
// other namespace's Tasks and Pipelines stay its tenants'.
func customize(objs []*unstructured.Unstructured, shellImage string) error {
	catalogNS := hcov1beta1.DefaultTektonPipelinesNamespace
	for _, o := range objs {
		var err error
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == "tekton-pipelines-controller":
			err = setShellImage(o, shellImage)
		case o.GetKind() == "ConfigMap" && o.GetName() == "feature-flags":
			err = unstructured.SetNestedField(o.Object, "disabled", "data", "coschedule")
			if err == nil {
				err = unstructured.SetNestedField(o.Object, "true", "data", "set-security-context")
			}
		case o.GetKind() == "Deployment" && o.GetName() == resolversName:
			err = setCommand(o, "/ko-app/resolvers")
		case o.GetKind() == "ConfigMap" && o.GetName() == "resolvers-feature-flags":
			err = unstructured.SetNestedField(o.Object, "false", "data", "enable-hub-resolver")
		case o.GetKind() == "ConfigMap" && o.GetName() == "cluster-resolver-config":
			err = unstructured.SetNestedStringMap(o.Object, map[string]string{"default-kind": "task",
				"default-namespace": catalogNS, "allowed-namespaces": catalogNS, "blocked-namespaces": ""}, "data")
		}
		if err != nil {
			return fmt.Errorf("customizing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// setCommand sets the command of deploy's first container.
func setCommand(deploy *unstructured.Unstructured, command ...string) error {
	return editContainer(deploy, func(ctr map[string]any) error {
		cmd := make([]any, len(command))
		for i, c := range command {
			cmd[i] = c
		}
		ctr["command"] = cmd
		return nil
	})
}

// setShellImage points the controller's -shell-image flag at our busybox.
func setShellImage(deploy *unstructured.Unstructured, image string) error {
	return editContainer(deploy, func(ctr map[string]any) error {
		args, _ := ctr["args"].([]any)
		found := false
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-shell-image" {
				args[i+1] = image
				found = true
			}
		}
		if !found {
			return errors.New("no -shell-image argument")
		}
		ctr["args"] = args
		return nil
	})
}

// editContainer changes the first container of deploy with edit.
func editContainer(deploy *unstructured.Unstructured, edit func(map[string]any) error) error {
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return fmt.Errorf("reading containers: %w", err)
	}
	if len(containers) == 0 {
		return errors.New("no containers")
	}
	if err := edit(containers[0].(map[string]any)); err != nil {
		return err
	}
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
	return k.waitDeployment(ctx, ResolversNamespace, resolversName)
}
