package waitforvmi

import (
	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

// Command is the wait-for-vmi-status step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "wait-for-vmi-status",
		Short: "Wait until a VirtualMachineInstance meets a condition",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.VMINamespace = kube.Namespace(p.VMINamespace)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			return Run(cmd.Context(), c, p, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.VMIName, "vmi-name", "", "name of the VirtualMachineInstance")
	f.StringVar(&p.VMINamespace, "vmi-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&p.SuccessCondition, "success-condition", "", `selector over the VMI's fields that ends the step successfully, e.g. "status.phase == Succeeded"`)
	f.StringVar(&p.FailureCondition, "failure-condition", "", `selector that fails the step, e.g. "status.phase in (Failed, Unknown)"`)
	return cmd
}
