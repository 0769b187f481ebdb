package cleanupvm

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

// Command is the cleanup-vm step.
func Command() *cobra.Command {
	var p Params
	var stop, del, timeout string
	cmd := &cobra.Command{
		Use:   "cleanup-vm",
		Short: "Stop and/or delete a VirtualMachine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if p.Stop, err = strconv.ParseBool(stop); err != nil {
				return fmt.Errorf("param stop %q is not true or false", stop)
			}
			if p.Delete, err = strconv.ParseBool(del); err != nil {
				return fmt.Errorf("param delete %q is not true or false", del)
			}
			if p.Timeout, err = time.ParseDuration(timeout); err != nil || p.Timeout <= 0 {
				return fmt.Errorf("param timeout %q is not a positive duration like 30m", timeout)
			}
			p.VMNamespace = kube.Namespace(p.VMNamespace)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			return Run(cmd.Context(), c, p, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.VMName, "vm-name", "", "name of the VM")
	f.StringVar(&p.VMNamespace, "vm-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&stop, "stop", "true", "stop the VM")
	f.StringVar(&del, "delete", "false", "delete the VM")
	f.StringVar(&timeout, "timeout", "30m", "how long to wait for the stop and delete")
	return cmd
}
