package createvm

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
	"github.com/tekvirt/tekvirt/tasks/vmcreate"
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
			p.Owner = kube.PodOwner(os.Getenv)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			start, err := kube.VMStarter()
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), c, start, p)
			if err != nil {
				return err
			}
			vmcreate.Report(cmd.OutOrStdout(), res)
			return result.Write(res.Map())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Manifest, "manifest", "", "VirtualMachine manifest (YAML or JSON)")
	f.StringVar(&p.Virtctl, "virtctl", "", "virtctl create vm flags, instead of a manifest")
	f.StringVar(&p.Namespace, "namespace", "", "namespace of the VM (manifest's, else the TaskRun's)")
	f.StringVar(&p.RunStrategy, "run-strategy", "", "runStrategy to set: Always, Halted, Manual, RerunOnFailure, Once")
	f.StringVar(&p.StartVM, "start-vm", "", "true starts the VM once created (unless it runs Always); false leaves it")
	f.StringVar(&p.SetOwnerReference, "set-owner-reference", "false", "make the step's Pod the VM's owner")
	return cmd
}
