package clonedisk

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/contracts/trust"
	"github.com/tekvirt/tekvirt/contracts/upload"
	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the clone-disk step.
func Command() *cobra.Command {
	var p Params
	var send SendParams
	cmd := &cobra.Command{
		Use:   "clone-disk",
		Short: "Copy a volume's disk.img to another volume",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if send.URL != "" {
				send.SourceDir, send.Token = p.SourceDir, os.Getenv(upload.TokenEnv)
				send.CA = func(ctx context.Context) ([]byte, error) {
					c, err := kube.Client()
					if err != nil {
						return nil, err
					}
					return kube.TekvirtCA(ctx, c)
				}
				if err := Send(cmd.Context(), send, cmd.OutOrStdout()); err != nil {
					return err
				}
				return result.Write(map[string]string{"method": "upload"})
			}
			method, err := Run(p, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return result.Write(map[string]string{"method": method})
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.SourceDir, "source-dir", "", "the source workspace's path")
	f.StringVar(&p.TargetDir, "target-dir", "", "the target workspace's path")
	f.StringVar(&p.Size, "size", "", "virtual size of the clone, e.g. 10Gi (default the source's)")
	f.StringVar(&send.URL, "send-url", "", "instead of copying, upload the source disk to this upload URL (token in $"+upload.TokenEnv+")")
	f.StringVar(&send.ServerName, "send-server-name", "", "name the upload server's certificate is for")
	f.StringVar(&send.CAFile, "send-ca", "", "CA of the upload server's certificate (default: tekvirt's CA bundle, ConfigMap "+trust.Namespace+"/"+trust.CABundleConfigMap+")")
	f.IntVar(&send.Attempts, "send-attempts", 10, "tries while the target is not ready")
	f.DurationVar(&send.Backoff, "send-backoff", 2*time.Second, "first wait between tries (doubling)")
	return cmd
}
