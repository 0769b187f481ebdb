package cluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// Where Pipelines-as-Code runs.
const (
	PaCNamespace  = "pipelines-as-code"
	pacModule     = "github.com/openshift-pipelines/pipelines-as-code"
	pacController = "pipelines-as-code-controller"
)

var pacComponents = []string{pacController, "pipelines-as-code-watcher", "pipelines-as-code-webhook"}

var pacBuild = toolBuild{
	name:   "pac",
	module: pacModule,
	pkgs:   append(append([]string{}, pacComponents...), "tkn-pac"),
	paths:  map[string]string{"tkn-pac": "./tkn-pac"},
	ldflags: func(v string) string {
		return "-s -w -X " + pacModule + "/pkg/params/versiondata.Version=" + v
	},
	coldHint: "~7 min on 2 cores the first time",
}

// pacManifests reads Pipelines-as-Code's release config (config/*.yaml of
// the pinned module; not its OpenShift extras), points its images at
// images, and sets what a cluster without internet needs: no remote tasks
// from a hub.
func (c *Cluster) pacManifests(images Images) ([]*unstructured.Unstructured, error) {
	m, err := c.toolModule(pacBuild)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(m.dir, "config", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no Pipelines-as-Code config in %s", m.dir)
	}
	objs, err := readManifests(files, images)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "pipelines-as-code" {
			if err := unstructured.SetNestedField(o.Object, "false", "data", "remote-tasks"); err != nil {
				return nil, err
			}
		}
		if o.GetKind() == "ConfigMap" && o.GetName() == "pipelines-as-code-info" {
			if err := unstructured.SetNestedField(o.Object, m.version, "data", "version"); err != nil {
				return nil, err
			}
		}
	}
	return objs, nil
}

// installPaC pushes Pipelines-as-Code's images, applies its release,
// waits for it and returns the URL of its controller's Service, where the
// forge's webhooks reach it (this machine routes Service addresses through
// kube-proxy as Pods do).
func (c *Cluster) installPaC(ctx context.Context, dir string) (string, error) {
	start := time.Now()
	images := Images{}
	for _, p := range pacComponents {
		ref, err := ocibuild.Push(nonRoot(goBinaryImage(filepath.Join(dir, p))), RegistryAddr+"/pac/"+p+":latest")
		if err != nil {
			return "", fmt.Errorf("pushing the image of %s: %w", p, err)
		}
		images[pacModule+"/cmd/"+p] = ref
	}
	objs, err := c.pacManifests(images)
	if err != nil {
		return "", err
	}
	cfg, cs, err := c.clientset()
	if err != nil {
		return "", err
	}
	a, err := newApplier(cfg)
	if err != nil {
		return "", err
	}
	if err := a.apply(ctx, objs); err != nil {
		return "", fmt.Errorf("installing Pipelines-as-Code: %w", err)
	}
	k := &kube{cs: cs}
	for _, d := range pacComponents {
		if err := k.waitDeployment(ctx, PaCNamespace, d); err != nil {
			return "", err
		}
	}
	svc, err := cs.CoreV1().Services(PaCNamespace).Get(ctx, pacController, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("the Service %s/%s has no port", PaCNamespace, pacController)
	}
	c.progress("%-24s available in %s", "pipelines-as-code", since(start))
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port)), nil
}
