package generatesshkeys

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the generate-ssh-keys step: flags are the task's string params,
// positional args the privateKeyConnectionOptions array.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "generate-ssh-keys [flags] -- [key:value ...]",
		Short: "Generate an SSH key pair into Secrets",
		RunE: func(cmd *cobra.Command, args []string) error {
			p.PrivateKeyConnectionOptions = args
			p.DefaultNamespace = os.Getenv("TASKRUN_NAMESPACE")
			cfg, err := rest.InClusterConfig()
			if err != nil {
				return fmt.Errorf("loading in-cluster config: %w", err)
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			res, err := Run(cmd.Context(), cs, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "public key appended to secret %s/%s\nprivate key stored in secret %s/%s\n",
				res.PublicKeySecretNamespace, res.PublicKeySecretName, res.PrivateKeySecretNamespace, res.PrivateKeySecretName)
			return result.Write(res.Map())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.PublicKeySecretName, "public-key-secret-name", "", "secret to append the public key to (generated when empty)")
	f.StringVar(&p.PublicKeySecretNamespace, "public-key-secret-namespace", "", "namespace of the public key secret (TaskRun namespace when empty)")
	f.StringVar(&p.PrivateKeySecretName, "private-key-secret-name", "", "new secret for the private key (generated when empty)")
	f.StringVar(&p.PrivateKeySecretNamespace, "private-key-secret-namespace", "", "namespace of the private key secret (TaskRun namespace when empty)")
	f.StringVar(&p.AdditionalSSHKeygenOptions, "additional-ssh-keygen-options", "", "ssh-keygen options: -t TYPE -b BITS -C COMMENT -m FORMAT -N \"\" -q -a -Z")
	return cmd
}
