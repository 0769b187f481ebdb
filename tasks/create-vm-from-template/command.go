package vmfromtemplate

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
	"github.com/tekvirt/tekvirt/tasks/vmcreate"
)

// Command is the create-vm-from-template step; its arguments are the
// templateParams entries (KEY:VALUE).
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "create-vm-from-template [KEY:VALUE...]",
		Short: "Create a VirtualMachine from an OpenShift Template",
		RunE: func(cmd *cobra.Command, args []string) error {
			p.TemplateParams = args
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
			fmt.Fprintf(cmd.OutOrStdout(), "template %s processed in %s\n", p.TemplateName, res.Processing.Round(10_000))
			vmcreate.Report(cmd.OutOrStdout(), res.Result)
			return result.Write(res.Map())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.TemplateName, "template-name", "", "name of the Template")
	f.StringVar(&p.TemplateNamespace, "template-namespace", "", "namespace of the Template (the TaskRun's when empty)")
	f.StringVar(&p.Namespace, "vm-namespace", "", "namespace of the VM (the TaskRun's when empty)")
	f.StringVar(&p.RunStrategy, "run-strategy", "", "runStrategy to set: Always, Halted, Manual, RerunOnFailure, Once")
	f.StringVar(&p.StartVM, "start-vm", "", "true starts the VM once created (unless it runs Always); false leaves it")
	f.StringVar(&p.SetOwnerReference, "set-owner-reference", "false", "make the step's Pod the VM's owner")
	return cmd
}
