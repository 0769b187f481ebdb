package hostedclusterpki

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Command is the hosted-cluster-pki step.
func Command() *cobra.Command {
	var p Params
	return hostedcp.Command("hosted-cluster-pki", "Make or keep a hosted control plane's CAs, client certificates, service-account key and kubeadmin password",
		&p.Namespace, nil, func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
