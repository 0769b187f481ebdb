package executeinvm

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/arrayargs"
	"github.com/tekvirt/tekvirt/tasks/guestrun"
	"github.com/tekvirt/tekvirt/tasks/kube"
)

// Command is the execute-in-vm step: positional arguments are the command
// and args arrays, each after its marker (--command ... --args ...).
func Command() *cobra.Command {
	var p guestrun.Params
	var timeout string
	cmd := &cobra.Command{
		Use:   "execute-in-vm [flags] -- --command [word ...] --args [arg ...]",
		Short: "Run a command or script in a VM's guest through its guest agent",
		RunE: func(cmd *cobra.Command, args []string) error {
			arrays, err := arrayargs.Split(args, "command", "args")
			if err != nil {
				return err
			}
			p.Command, p.Args = arrays["command"], arrays["args"]
			d, err := time.ParseDuration(timeout)
			if err != nil || d <= 0 {
				return errors.New("param timeout " + timeout + " is not a positive duration like 5m")
			}
			p.Timeout = d
			p.VMNamespace = kube.Namespace(p.VMNamespace)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			if p.Start, err = kube.VMStarter(); err != nil {
				return err
			}
			ex := guestrun.NodeExecutor(func(ctx context.Context) ([]byte, error) { return kube.TekvirtCA(ctx, c) })
			return guestrun.Run(cmd.Context(), c, ex, p, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.VMName, "vm-name", "", "name of the VM (its VMI has the same name)")
	f.StringVar(&p.VMNamespace, "vm-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&p.SecretName, "secret-name", "", "connection secret (generate-ssh-keys format) to run over SSH instead of the guest agent; "+guestrun.NoSecret+" is none")
	f.StringVar(&p.Script, "script", "", "script run with /bin/sh -c in the guest; excludes command")
	f.StringVar(&timeout, "timeout", "5m", "how long to wait for the guest agent and the command together")
	return cmd
}
