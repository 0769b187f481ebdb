package step

import (
	"github.com/spf13/cobra"

	generatesshkeys "github.com/tekvirt/tekvirt/tasks/generate-ssh-keys"
)

// Root returns the tekvirt-step command with every task's step.
func Root() *cobra.Command {
	root := &cobra.Command{
		Use:           "tekvirt-step",
		Short:         "Step code of tekvirt's Tekton tasks",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(generatesshkeys.Command())
	return root
}
