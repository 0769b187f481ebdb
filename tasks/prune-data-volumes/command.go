package prunedatavolumes

import (
	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

// Command is the prune-data-volumes step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "prune-data-volumes",
		Short: "Delete the DataVolumes a selector picks but the newest few and a DataSource's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.Namespace = kube.Namespace(p.Namespace)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			_, err = Run(cmd.Context(), c, p, cmd.OutOrStdout())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Namespace, "namespace", "", "namespace of the DataVolumes (the TaskRun's when empty)")
	f.StringVar(&p.Selector, "selector", "", "label selector of the DataVolumes to prune (required)")
	f.IntVar(&p.Keep, "keep", 3, "how many of the newest to keep")
	f.StringVar(&p.DataSource, "data-source", "", "DataSource whose DataVolume is always kept")
	return cmd
}
