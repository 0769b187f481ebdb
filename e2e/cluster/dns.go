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
	resolved, err := images.Resolve(corednsManifest)
	if err != nil {
		return fmt.Errorf("coredns.yaml: %w", err)
	}
	objs, err := ctrlconfig.Decode([]byte(resolved))
	if err != nil {
		return fmt.Errorf("decoding coredns.yaml: %w", err)
	}
	if err := a.apply(ctx, objs); err != nil {
		return fmt.Errorf("installing the cluster DNS: %w", err)
	}
	return k.waitDeployment(ctx, "kube-system", "coredns")
}
