package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
)

// fromKubeconfig marks a --namespace flag whose default is the kubeconfig
// context's namespace.
const fromKubeconfig = "tekvirt.io/namespace-from-kubeconfig"

type globalFlags struct {
	home   string
	source string
}

func newRoot() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "tekvirt",
		Short: "Virtual machines on Kubernetes as Tekton pipelines",
		Long: `Virtual machines on Kubernetes as Tekton pipelines.

tekvirt's commands act on the cluster of $KUBECONFIG (else the local testbed's,
$TEKVIRT_HOME/kubeconfig) as KubeVirt's virtctl and HyperShift's hcp do; VM commands
default to the kubeconfig context's namespace. up, down, status, release, catalog,
guest-url and console-log run the local testbed (tekvirt-testbed).`,
		Example: `  tekvirt up --nodes 2                       # a local cluster with tekvirt installed
  tekvirt start demo; tekvirt console demo   # a VM's lifecycle and serial console
  tekvirt image-upload dv my-disk --size=1Gi --image-path=disk.qcow2
  tekvirt create cluster kubevirt --name demo --pull-secret pull-secret.json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.defaultNamespace(cmd)
		},
	}
	defHome := os.Getenv("TEKVIRT_HOME")
	if defHome == "" {
		if h, err := os.UserHomeDir(); err == nil {
			defHome = filepath.Join(h, ".tekvirt")
		}
	}
	root.PersistentFlags().StringVar(&g.home, "home", defHome, "state directory ($TEKVIRT_HOME)")
	root.PersistentFlags().StringVar(&g.source, "source", "", "tekvirt source tree, for the testbed commands (default: the Go module of the working directory)")
	root.AddCommand(vmCmds(g)...)
	root.AddCommand(exposeCmd(g))
	root.AddCommand(imageUploadCmd(g), consoleCmd(g))
	root.AddCommand(clusterCmds(g)...)
	root.AddCommand(testbedCmds(g)...)
	return root
}

// namespaceFlag adds -n/--namespace, defaulting as kubectl's and virtctl's
// do: to the kubeconfig context's namespace, else "default".
func namespaceFlag(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVarP(p, "namespace", "n", "", usage+" (default: the kubeconfig context's namespace, else default)")
	_ = fs.SetAnnotation("namespace", fromKubeconfig, []string{"true"})
}

// defaultNamespace fills in an unset namespaceFlag of cmd from the
// kubeconfig.
func (g *globalFlags) defaultNamespace(cmd *cobra.Command) error {
	fl := cmd.Flags().Lookup("namespace")
	if fl == nil || fl.Changed || fl.Annotations[fromKubeconfig] == nil {
		return nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: g.kubeconfigPath()}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil {
		return fmt.Errorf("the namespace of %s: %w", rules.ExplicitPath, err)
	}
	return fl.Value.Set(ns)
}
