package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"
)

// vmClient connects with $KUBECONFIG, else the cluster's admin kubeconfig.
func (g *globalFlags) vmClient() (client.Client, error) {
	c, _, err := g.kubeClient()
	return c, err
}

// kubeClient is vmClient with its config, knowing the KubeVirt and CDI
// groups (upload included).
func (g *globalFlags) kubeClient() (client.Client, *rest.Config, error) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(g.home, "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, cdiv1.AddToScheme, uploadv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	return c, cfg, err
}

// getVM connects and reads the VM ns/name.
func (g *globalFlags) getVM(ctx context.Context, ns, name string) (client.Client, *v1.VirtualMachine, error) {
	c, err := g.vmClient()
	if err != nil {
		return nil, nil, err
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		return nil, nil, err
	}
	return c, vm, nil
}

// vmCmds are start, stop and restart, which act as virtctl's do through the
// VM's runStrategy.
func vmCmds(g *globalFlags) []*cobra.Command {
	var ns string
	setRunStrategy := func(rs v1.VirtualMachineRunStrategy, verb string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, vm, err := g.getVM(cmd.Context(), ns, args[0])
			if err != nil {
				return err
			}
			base := vm.DeepCopy()
			vm.Spec.RunStrategy, vm.Spec.Running = &rs, nil
			if err := c.Patch(cmd.Context(), vm, client.MergeFrom(base)); err != nil {
				return fmt.Errorf("%s VM %s/%s: %w", verb, ns, args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s/%s was scheduled to %s\n", ns, args[0], verb)
			return nil
		}
	}
	start := &cobra.Command{Use: "start NAME", Short: "Start a VM (runStrategy Always)", Args: cobra.ExactArgs(1),
		RunE: setRunStrategy(v1.RunStrategyAlways, "start")}
	stop := &cobra.Command{Use: "stop NAME", Short: "Stop a VM (runStrategy Halted)", Args: cobra.ExactArgs(1),
		RunE: setRunStrategy(v1.RunStrategyHalted, "stop")}
	restart := &cobra.Command{Use: "restart NAME", Short: "Restart a running VM: its VMI is deleted and the VM starts a new one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, vm, err := g.getVM(cmd.Context(), ns, args[0])
			if err != nil {
				return err
			}
			if rs, _ := vm.RunStrategy(); rs != v1.RunStrategyAlways && rs != v1.RunStrategyRerunOnFailure {
				return fmt.Errorf("VM %s/%s has runStrategy %s: restart needs Always or RerunOnFailure", ns, args[0], rs)
			}
			vmi := &v1.VirtualMachineInstance{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, vmi); err != nil {
				return fmt.Errorf("VM %s/%s is not running: %w", ns, args[0], err)
			}
			if err := c.Delete(cmd.Context(), vmi); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s/%s was scheduled to restart\n", ns, args[0])
			return nil
		}}
	cmds := []*cobra.Command{start, stop, restart}
	for _, c := range cmds {
		c.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace of the VM")
	}
	return cmds
}
