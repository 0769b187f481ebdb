package hostedclustercontrolplane

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Command is the hosted-cluster-control-plane step.
func Command() *cobra.Command {
	var p Params
	return hostedcp.Command("hosted-cluster-control-plane", "Run a hosted cluster's kube-apiserver, kube-controller-manager and kube-scheduler", &p.Namespace,
		func(f *pflag.FlagSet) {
			f.StringVar(&p.Image, "release-image", "", "the release image, holding /usr/bin/kube-apiserver, kube-controller-manager and kube-scheduler")
			f.IntVar(&p.Replicas, "replicas", 1, "replicas of each Deployment")
			f.StringVar(&p.ServiceCIDR, "service-cidr", "172.31.0.0/16", "the hosted cluster's service network")
			f.StringVar(&p.ClusterCIDR, "cluster-cidr", "10.132.0.0/14", "the hosted cluster's pod network")
			f.StringVar(&p.ServiceType, "api-server-service-type", "ClusterIP", "type of the API server's Service: ClusterIP, NodePort or LoadBalancer")
		},
		func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
