package hostedcp

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Results are a task's results by name.
type Results interface{ Map() map[string]string }

// Command is a hosted-cluster task's step: its flags (bind), the
// --control-plane-namespace flag into ns (the TaskRun's namespace when
// empty), then run with the step's in-cluster client and its results
// written.
func Command[R Results](use, short string, ns *string, bind func(*pflag.FlagSet), run func(context.Context, client.Client, io.Writer) (R, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			*ns = kube.Namespace(*ns)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			res, err := run(cmd.Context(), c, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return result.Write(res.Map())
		},
	}
	cmd.Flags().StringVar(ns, "control-plane-namespace", "", "the control-plane namespace (the TaskRun's when empty)")
	if bind != nil {
		bind(cmd.Flags())
	}
	return cmd
}
