package cluster

import (
	"context"
	_ "embed"
	"fmt"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// The cluster DNS: CoreDNS (built from its module by e2e/tools/coredns)
// behind kube-system's kube-dns Service, as kubeadm and kind set it up.
const (
	// clusterDNSIP is the kube-dns Service's address, the kubelets'
	// clusterDNS: kubeadm's, the tenth of the Service range.
	clusterDNSIP = "10.96.0.10"
	// CoreDNSImageKey names CoreDNS's image in Images.
	CoreDNSImageKey = "github.com/tekvirt/tekvirt/e2e/tools/coredns"
)

//go:embed coredns.yaml
var corednsManifest string

// installDNS deploys the cluster DNS and waits until it answers.
func (c *Cluster) installDNS(ctx context.Context, a *applier, k *kube, images Images) error {
	if err := applyManifest(ctx, a, images, "coredns.yaml", corednsManifest); err != nil {
		return fmt.Errorf("installing the cluster DNS: %w", err)
	}
	return k.waitDeployment(ctx, "kube-system", "coredns")
}

// applyManifest applies an embedded manifest (name, for errors) with its
// ko:// images resolved.
func applyManifest(ctx context.Context, a *applier, images Images, name, manifest string) error {
	resolved, err := images.Resolve(manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	objs, err := ctrlconfig.Decode([]byte(resolved))
	if err != nil {
		return fmt.Errorf("decoding %s: %w", name, err)
	}
	return a.apply(ctx, objs)
}
