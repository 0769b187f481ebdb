package executeinvm

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

// argsMarker separates the command array from the args array among the
// positional arguments (Tekton passes each array as separate words).
const argsMarker = "--args"

// Command is the execute-in-vm step: positional arguments are the command
// array, then argsMarker and the args array.
func Command() *cobra.Command {
	var p Params
	var timeout string
	cmd := &cobra.Command{
		Use:   "execute-in-vm [flags] -- [command ...] " + argsMarker + " [args ...]",
		Short: "Run a command or script in a VM's guest through its guest agent",
		RunE: func(cmd *cobra.Command, args []string) error {
			p.Command, p.Args = splitArgs(args)
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
			return Run(cmd.Context(), c, HTTPExecutor{
				CA: func(ctx context.Context) ([]byte, error) { return kube.TekvirtCA(ctx, c) }, TokenDir: HandlerTokenDir, Attempts: 3}, p, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.VMName, "vm-name", "", "name of the VM (its VMI has the same name)")
	f.StringVar(&p.VMNamespace, "vm-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&p.SecretName, "secret-name", "", "connection secret (generate-ssh-keys format) to run over SSH instead of the guest agent")
	f.StringVar(&p.Script, "script", "", "script run with /bin/sh -c in the guest; excludes command")
	f.StringVar(&timeout, "timeout", "5m", "how long to wait for the guest agent and the command together")
	return cmd
}

func splitArgs(args []string) (command, rest []string) {
	for i, a := range args {
		if a == argsMarker {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}
