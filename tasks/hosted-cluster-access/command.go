package hostedclusteraccess

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Command is the hosted-cluster-access step.
func Command() *cobra.Command {
	var p Params
	return hostedcp.Command("hosted-cluster-access", "Write a hosted cluster's admin kubeconfig and kubeadmin password Secrets", &p.Namespace,
		func(f *pflag.FlagSet) {
			f.StringVar(&p.ClusterName, "cluster-name", "", "the HostedCluster's name")
			f.StringVar(&p.ClusterNamespace, "cluster-namespace", "", "the HostedCluster's namespace, where the Secrets go")
			f.StringVar(&p.ClusterUID, "cluster-uid", "", "the HostedCluster's UID: the Secrets are owned by it when set")
			f.StringVar(&p.PullSecretName, "pull-secret-name", "", "the HostedCluster's pull secret, copied into the control-plane namespace")
		},
		func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
