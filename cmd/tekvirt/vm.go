package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
)

// kubeconfigPath is $KUBECONFIG, else the local testbed's admin kubeconfig.
func (g *globalFlags) kubeconfigPath() string {
	if p := os.Getenv("KUBECONFIG"); p != "" {
		return p
	}
	return filepath.Join(g.home, "kubeconfig")
}

// vmClient connects with kubeconfigPath.
func (g *globalFlags) vmClient() (client.Client, error) {
	c, _, err := g.kubeClient()
	return c, err
}

// kubeClient is vmClient with its config, knowing the KubeVirt and CDI
// groups (upload included).
func (g *globalFlags) kubeClient() (client.Client, *rest.Config, error) {
	kubeconfig := g.kubeconfigPath()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, cdiv1.AddToScheme, uploadv1beta1.AddToScheme, hyperv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	return c, cfg, err
}

// vmCmds are start, stop and restart, which call the VM's subresources
// (subresources.kubevirt.io), as virtctl's do.
func vmCmds(g *globalFlags) []*cobra.Command {
	var ns string
	var grace int64 = -1
	change := func(sub string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if grace >= 0 {
				body[map[string]string{"stop": "gracePeriod", "restart": "gracePeriodSeconds"}[sub]] = grace
			}
			if err := g.vmSubresource(cmd.Context(), ns, args[0], sub, body); err != nil {
				return fmt.Errorf("%s VM %s/%s: %w", sub, ns, args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "VM %s/%s was scheduled to %s\n", ns, args[0], sub)
			return nil
		}
	}
	start := &cobra.Command{Use: "start NAME", Short: "Start a VM (Halted: runStrategy becomes Always; Manual, RerunOnFailure: a start request)", Args: cobra.ExactArgs(1),
		Example: "  tekvirt start demo\n  tekvirt start demo -n my-vms",
		RunE:    change("start")}
	stop := &cobra.Command{Use: "stop NAME", Short: "Stop a VM (Always, Once: runStrategy becomes Halted; Manual, RerunOnFailure: a stop request)", Args: cobra.ExactArgs(1),
		Example: "  tekvirt stop demo\n  tekvirt stop demo --grace-period 0   # at once, without waiting for the guest",
		RunE:    change("stop")}
	restart := &cobra.Command{Use: "restart NAME", Short: "Restart a VM: its VMI is stopped and a new one started", Args: cobra.ExactArgs(1),
		Example: "  tekvirt restart demo\n  tekvirt restart demo --grace-period 0   # forced",
		RunE:    change("restart")}
	stop.Flags().Int64Var(&grace, "grace-period", -1, "seconds the guest has to shut down (default: the VMI's terminationGracePeriodSeconds)")
	restart.Flags().Int64Var(&grace, "grace-period", -1, "0 stops the VMI at once (a forced restart)")
	cmds := []*cobra.Command{start, stop, restart}
	for _, c := range cmds {
		namespaceFlag(c.Flags(), &ns, "namespace of the VM")
	}
	return cmds
}

// vmSubresource PUTs body to the VM's subresource sub.
func (g *globalFlags) vmSubresource(ctx context.Context, ns, name, sub string, body any) error {
	_, cfg, err := g.kubeClient()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return dc.RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ns, "virtualmachines", name, sub).
		SetHeader("Content-Type", "application/json").Body(data).Do(ctx).Error()
}
