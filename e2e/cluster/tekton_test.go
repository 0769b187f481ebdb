package cluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

// TestTektonManifestsCustomized reads Tekton's release config from the
// pinned module: the resolvers come with it, their Deployment runs the
// binary without tini, the hub resolver is off and the cluster resolver
// serves only the catalog namespace; Tekton sets the security context of
// its own containers (set-security-context).
func TestTektonManifestsCustomized(t *testing.T) {
	c := &Cluster{Source: "../.."}
	images := Images{TektonShellImageKey: "registry.test/tekton-shell@sha256:0"}
	for _, p := range toolBuilds[1].pkgs {
		images[tektonModule+"/cmd/"+p] = "registry.test/tekton/" + p + "@sha256:0"
	}
	objs, err := c.tektonManifests(images)
	if err != nil {
		t.Fatal(err)
	}
	find := func(kind, ns, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s %s/%s in Tekton's config", kind, ns, name)
		return nil
	}
	deploy := find("Deployment", ResolversNamespace, resolversName)
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	ctr := containers[0].(map[string]any)
	if cmd, _ := ctr["command"].([]any); len(cmd) != 1 || cmd[0] != "/ko-app/resolvers" || ctr["image"] != "registry.test/tekton/resolvers@sha256:0" {
		t.Errorf("resolvers container: command %v, image %v", ctr["command"], ctr["image"])
	}
	flags, _, _ := unstructured.NestedStringMap(find("ConfigMap", ResolversNamespace, "resolvers-feature-flags").Object, "data")
	if flags["enable-hub-resolver"] != "false" || flags["enable-cluster-resolver"] != "true" || flags["enable-bundles-resolver"] != "true" ||
		flags["enable-git-resolver"] != "true" || flags["enable-http-resolver"] != "true" {
		t.Errorf("resolver flags %v", flags)
	}
	features, _, _ := unstructured.NestedStringMap(find("ConfigMap", TektonNamespace, "feature-flags").Object, "data")
	if features["set-security-context"] != "true" || features["coschedule"] != "disabled" {
		t.Errorf("feature flags %v: want set-security-context and coschedule disabled", features)
	}
	cluster, _, _ := unstructured.NestedStringMap(find("ConfigMap", ResolversNamespace, "cluster-resolver-config").Object, "data")
	if ns := hcov1beta1.DefaultTektonPipelinesNamespace; cluster["allowed-namespaces"] != ns || cluster["default-namespace"] != ns {
		t.Errorf("cluster resolver config %v, want only %s", cluster, ns)
	}
}
