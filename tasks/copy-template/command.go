package copytemplate

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the copy-template step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "copy-template",
		Short: "Copy an OpenShift Template",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.DefaultNamespace = kube.Namespace("")
			p.Owner = kube.PodOwner(os.Getenv)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), c, p)
			if err != nil {
				return err
			}
			verb := "created"
			switch {
			case res.Existed:
				verb = "already copied by an earlier run"
			case res.Replaced:
				verb = "replaced"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "template %s/%s %s\n", res.Namespace, res.Name, verb)
			return result.Write(map[string]string{"name": res.Name, "namespace": res.Namespace})
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.SourceName, "source-template-name", "", "name of the template to copy")
	f.StringVar(&p.SourceNamespace, "source-template-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&p.TargetName, "target-template-name", "", "name of the copy (generated from the source's when empty)")
	f.StringVar(&p.TargetNamespace, "target-template-namespace", "", "namespace of the copy (the TaskRun's when empty)")
	f.StringVar(&p.AllowReplace, "allow-replace", "false", "replace a template of the target's name")
	f.StringVar(&p.SetOwnerReference, "set-owner-reference", "false", "make the step's Pod the copy's owner")
	return cmd
}
