package cleanupvm

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/arrayargs"
	"github.com/tekvirt/tekvirt/tasks/guestrun"
	"github.com/tekvirt/tekvirt/tasks/kube"
)

// Command is the cleanup-vm step: positional arguments are the command and
// args arrays, each after its marker (--command ... --args ...).
func Command() *cobra.Command {
	var p Params
	var stop, del, timeout string
	cmd := &cobra.Command{
		Use:   "cleanup-vm [flags] -- --command [word ...] --args [arg ...]",
		Short: "Run a command in a VirtualMachine, then stop and/or delete it",
		RunE: func(cmd *cobra.Command, args []string) error {
			arrays, err := arrayargs.Split(args, "command", "args")
			if err != nil {
				return err
			}
			p.Guest.Command, p.Guest.Args = arrays["command"], arrays["args"]
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
			if p.HasGuestCommand() {
				if p.Guest.Start, err = kube.VMStarter(); err != nil {
					return err
				}
				p.Executor = guestrun.NodeExecutor(func(ctx context.Context) ([]byte, error) { return kube.TekvirtCA(ctx, c) })
			}
			return Run(cmd.Context(), c, p, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.VMName, "vm-name", "", "name of the VM")
	f.StringVar(&p.VMNamespace, "vm-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&stop, "stop", "true", "stop the VM")
	f.StringVar(&del, "delete", "false", "delete the VM")
	f.StringVar(&timeout, "timeout", "30m", "how long the command, the stop and the delete may take together")
	f.StringVar(&p.Guest.SecretName, "secret-name", guestrun.NoSecret, "connection secret (generate-ssh-keys format) to run the command over SSH; "+guestrun.NoSecret+" uses the guest agent")
	f.StringVar(&p.Guest.Script, "script", "", "script run with /bin/sh -c in the guest first; excludes command")
	return cmd
}
