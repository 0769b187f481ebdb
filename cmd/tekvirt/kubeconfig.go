package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// kubeconfigCmd is `create kubeconfig`, as hcp's: the hosted cluster's
// admin kubeconfig on stdout.
func kubeconfigCmd(g *globalFlags) *cobra.Command {
	var name, ns string
	cmd := &cobra.Command{Use: "kubeconfig", Short: "Print a hosted cluster's admin kubeconfig", Args: cobra.NoArgs,
		Example: "  tekvirt create kubeconfig --name demo > demo.kubeconfig\n  kubectl --kubeconfig demo.kubeconfig get nodes",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.printKubeconfig(cmd.Context(), ns, name, cmd.OutOrStdout())
		}}
	cmd.Flags().StringVar(&name, "name", "example", "name of the hosted cluster")
	cmd.Flags().StringVar(&ns, "namespace", "clusters", "namespace of the HostedCluster")
	return cmd
}

// printKubeconfig writes the Secret the HostedCluster's status.kubeconfig
// names.
func (g *globalFlags) printKubeconfig(ctx context.Context, ns, name string, out io.Writer) error {
	c, err := g.vmClient()
	if err != nil {
		return err
	}
	hc := &hyperv1.HostedCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
		return fmt.Errorf("reading HostedCluster %s/%s: %w", ns, name, err)
	}
	if hc.Status.KubeConfig == nil {
		return fmt.Errorf("the HostedCluster %s/%s has no kubeconfig yet (status.kubeconfig is empty; see its Available condition)", ns, name)
	}
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: hc.Status.KubeConfig.Name}
	if err := c.Get(ctx, key, s); err != nil {
		return fmt.Errorf("reading the kubeconfig Secret %s: %w", key, err)
	}
	data := s.Data[hostedcluster.KubeconfigKey]
	if len(data) == 0 {
		return fmt.Errorf("secret %s has no %s", key, hostedcluster.KubeconfigKey)
	}
	_, err = out.Write(data)
	return err
}
