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
		func(*pflag.FlagSet) {},
		func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
