package hostedclusterwait

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Command is the hosted-cluster-wait step.
func Command() *cobra.Command {
	var p Params
	return hostedcp.Command("hosted-cluster-wait", "Wait until a hosted control plane serves", &p.Namespace,
		func(f *pflag.FlagSet) { f.DurationVar(&p.Timeout, "timeout", 10*time.Minute, "how long to wait") },
		func(ctx context.Context, c client.Client, out io.Writer) (Result, error) { return Run(ctx, c, p, out) })
}
