package clonedisk

import (
	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the clone-disk step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "clone-disk",
		Short: "Copy a volume's disk.img to another volume",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			method, err := Run(p, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return result.Write(map[string]string{"method": method})
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.SourceDir, "source-dir", "", "the source workspace's path")
	f.StringVar(&p.TargetDir, "target-dir", "", "the target workspace's path")
	f.StringVar(&p.Size, "size", "", "virtual size of the clone, e.g. 10Gi (default the source's)")
	return cmd
}
