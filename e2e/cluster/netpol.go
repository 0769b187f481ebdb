package cluster

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// NetworkPolicyImageKey names the NetworkPolicy agent's image in Images:
// kube-network-policies (built from its module by e2e/tools/netpol) and
// tekvirt-netpol-queue.
const NetworkPolicyImageKey = "github.com/tekvirt/tekvirt/e2e/tools/netpol"

//go:embed netpol.yaml
var netpolManifest string

// networkPolicyImage holds the agent and the steering at the paths
// netpol.yaml runs them from.
func networkPolicyImage(b binaries) ocibuild.Spec {
	return ocibuild.Spec{
		Files: map[string]ocibuild.File{
			"/bin/kube-network-policies": {Source: b.netpol, Mode: 0o755},
			"/bin/tekvirt-netpol-queue":  {Source: filepath.Join(b.tekvirt, "tekvirt-netpol-queue"), Mode: 0o755},
			"/tmp":                       {Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{"/bin/kube-network-policies"},
	}
}

// installNetworkPolicy deploys the NetworkPolicy agent and waits until it
// runs on every node.
func (c *Cluster) installNetworkPolicy(ctx context.Context, a *applier, k *kube, images Images) error {
	if err := applyManifest(ctx, a, images, "netpol.yaml", netpolManifest); err != nil {
		return fmt.Errorf("installing the NetworkPolicy agent: %w", err)
	}
	return k.waitDaemonSet(ctx, "kube-system", "kube-network-policies")
}

// waitDaemonSet waits until every node runs a ready Pod of the DaemonSet's
// current revision; on timeout it names the pods' waiting reasons.
func (k *kube) waitDaemonSet(ctx context.Context, ns, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := k.cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.DesiredNumberScheduled > 0 &&
			s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled, nil
	})
	if err == nil {
		return nil
	}
	problems := err.Error()
	if d, err := k.cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		problems = k.podProblems(ctx, ns, d.Spec.Selector)
	}
	return fmt.Errorf("daemonset %s/%s not ready on every node: %s (kubectl -n %s logs ds/%s --all-containers)", ns, name, problems, ns, name)
}
