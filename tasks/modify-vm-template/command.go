package modifytemplate

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/arrayargs"
	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the modify-vm-template step; its arguments are the array
// params, each after its marker (--templateLabels a:b --disks {...}).
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "modify-vm-template [--ARRAY_PARAM ENTRY...]...",
		Short: "Modify an OpenShift Template of a VirtualMachine, or delete it",
		RunE: func(cmd *cobra.Command, args []string) error {
			arrays, err := arrayargs.Split(args, ArrayParams...)
			if err != nil {
				return err
			}
			p.Arrays = arrays
			p.DefaultNamespace = kube.Namespace("")
			c, err := kube.Client()
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), c, p)
			if err != nil {
				return err
			}
			verb := "modified"
			if res.Deleted {
				verb = "deleted"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "template %s/%s %s\n", res.Namespace, res.Name, verb)
			return result.Write(map[string]string{"name": res.Name, "namespace": res.Namespace})
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.TemplateName, "template-name", "", "name of the template")
	f.StringVar(&p.TemplateNamespace, "template-namespace", "", "its namespace (the TaskRun's when empty)")
	f.StringVar(&p.CPUSockets, "cpu-sockets", "", "CPU sockets of the VM (0: unchanged)")
	f.StringVar(&p.CPUCores, "cpu-cores", "", "CPU cores of the VM (0: unchanged)")
	f.StringVar(&p.CPUThreads, "cpu-threads", "", "CPU threads of the VM (0: unchanged)")
	f.StringVar(&p.Memory, "memory", "", "memory of the VM (e.g. 2Gi; empty: unchanged)")
	f.StringVar(&p.DeleteDisks, "delete-disks", "false", "remove the VM's disks first")
	f.StringVar(&p.DeleteVolumes, "delete-volumes", "false", "remove the VM's volumes first")
	f.StringVar(&p.DeleteDatavolumeTemplate, "delete-datavolume-template", "false", "remove the VM's DataVolume templates, their volumes and disks first")
	f.StringVar(&p.DeleteTemplateParameters, "delete-template-parameters", "false", "remove the template's parameters first")
	f.StringVar(&p.DeleteTemplate, "delete-template", "false", "delete the template instead")
	// The array markers come after "--"; keep cobra from reading them.
	cmd.Flags().SetInterspersed(false)
	return cmd
}
