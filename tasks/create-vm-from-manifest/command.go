package createvm

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the create-vm-from-manifest step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "create-vm-from-manifest",
		Short: "Create a VirtualMachine from a manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.DefaultNamespace = kube.Namespace("")
			p.OwnerName, p.OwnerUID = ownerFromEnv(os.Getenv)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), c, p)
			if err != nil {
				return err
			}
			verb := "created"
			if res.Existed {
				verb = "already created by an earlier run"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VirtualMachine %s/%s %s\n", res.Namespace, res.Name, verb)
			return result.Write(res.Map())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Manifest, "manifest", "", "VirtualMachine manifest (YAML or JSON)")
	f.StringVar(&p.Namespace, "namespace", "", "namespace of the VM (manifest's, else the TaskRun's)")
	f.StringVar(&p.RunStrategy, "run-strategy", "", "runStrategy to set: Always, Halted, Manual, RerunOnFailure, Once")
	f.StringVar(&p.StartVM, "start-vm", "", "true sets runStrategy Always, false Halted")
	f.StringVar(&p.SetOwnerReference, "set-owner-reference", "false", "make the step's Pod the VM's owner")
	return cmd
}
