package modifydataobject

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the modify-data-object step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "modify-data-object",
		Short: "Create (or delete) a DataVolume or DataSource and wait for it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.DefaultNamespace = kube.Namespace("")
			p.Owner = kube.PodOwner(os.Getenv)
			c, err := kube.Client()
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), c, p, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return result.Write(res.Map())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Manifest, "manifest", "", "DataVolume or DataSource manifest (YAML or JSON)")
	f.StringVar(&p.Namespace, "namespace", "", "namespace of the object (manifest's, else the TaskRun's)")
	f.BoolVar(&p.WaitForSuccess, "wait-for-success", false, "wait until a DataVolume Succeeded or a DataSource is Ready")
	f.BoolVar(&p.AllowReplace, "allow-replace", false, "replace an object of the same name")
	f.BoolVar(&p.DeleteObject, "delete-object", false, "delete --delete-object-kind/--delete-object-name instead of creating")
	f.StringVar(&p.DeleteObjectKind, "delete-object-kind", "", "DataVolume, DataSource or PersistentVolumeClaim")
	f.StringVar(&p.DeleteObjectName, "delete-object-name", "", "name of the object to delete")
	f.DurationVar(&p.Timeout, "timeout", time.Hour, "how long to wait for success or deletion")
	f.BoolVar(&p.SetOwnerReference, "set-owner-reference", false, "make the step's Pod the created object's owner")
	return cmd
}
