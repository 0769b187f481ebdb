package diskuploader

import (
	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the disk-uploader step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "disk-uploader",
		Short: "Push the disk of a stopped VM or an idle PVC to a registry as a containerDisk",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.Namespace = kube.Namespace("")
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
	f.StringVar(&p.Kind, "export-source-kind", "", "vm or pvc")
	f.StringVar(&p.Name, "export-source-name", "", "name of the VM or PVC")
	f.StringVar(&p.Volume, "volume-name", "", "the claim holding the disk (mounted at --dir)")
	f.StringVar(&p.Dir, "dir", "", "where the claim is mounted")
	f.StringVar(&p.Destination, "image-destination", "", "image reference to push to")
	f.StringVar(&p.PushTimeout, "push-timeout", "120", "minutes the push may take")
	f.StringVar(&p.SecretName, "secret-name", "", "Secret with accessKeyId and secretKey for the registry")
	f.StringVar(&p.CertConfigMap, "cert-configmap", "", "ConfigMap with extra CA certificates for the registry")
	return cmd
}
