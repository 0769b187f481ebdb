package hostedclusterbootstrap

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Command is the hosted-cluster-bootstrap step.
func Command() *cobra.Command {
	var p Params
	return hostedcp.Command("hosted-cluster-bootstrap", "Make the bootstrap token and user-data a hosted cluster's workers join with", &p.Namespace,
		func(f *pflag.FlagSet) {
			f.StringVar(&p.ClusterCIDR, "cluster-cidr", "", "the hosted cluster's pod network")
			f.StringVar(&p.ServiceCIDR, "service-cidr", "", "the hosted cluster's Service network")
			f.StringVar(&p.LocalRegistry, "local-registry", "", "the infrastructure's local registry, pulled from over plain HTTP")
			f.StringVar(&p.LocalRegistryHost, "local-registry-host", "", "the name images of the local registry may carry besides, pulled from --local-registry")
			f.StringVar(&p.CoreDNSImage, "coredns-image", "", "the hosted cluster DNS's image; no cluster DNS when empty")
			f.StringVar(&p.RouterImage, "router-image", "", "the hosted cluster's default router's image; no default ingress when empty")
			f.StringVar(&p.IngressDomain, "ingress-domain", "", "the default ingress's domain (apps.<name>.<baseDomain>)")
			f.IntVar(&p.RouterReplicas, "router-replicas", 1, "the default router's replicas (1 for SingleReplica, 2 for HighlyAvailable)")
			f.StringVar(&p.KonnectivityAgentImage, "konnectivity-agent-image", "", "the workers' Konnectivity agent's image; no agents when empty")
		},
		func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
