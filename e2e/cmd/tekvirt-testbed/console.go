package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/e2e/cluster"
)

// consoleCmd prints a VMI's serial log from its launcher Pod's volume, which
// only a process on the VMI's node can read: here, one of the testbed's.
func consoleCmd(g *globalFlags) *cobra.Command {
	var ns string
	var follow bool
	cmd := &cobra.Command{Use: "console-log NAME", Short: "Print the serial console log of a VMI running on this machine's testbed (-f follows)", Args: cobra.ExactArgs(1),
		Example: "  tekvirt console-log demo\n  tekvirt console-log demo -f -n my-vms",
		RunE: func(cmd *cobra.Command, args []string) error {
			kubeconfig := os.Getenv("KUBECONFIG")
			if kubeconfig == "" {
				kubeconfig = filepath.Join(g.home, "kubeconfig")
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("loading %s: %w", kubeconfig, err)
			}
			s := runtime.NewScheme()
			if err := v1.AddToScheme(s); err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: s})
			if err != nil {
				return err
			}
			return printConsole(cmd.Context(), c, &cluster.Cluster{Home: g.home}, ns, args[0], follow, cmd.OutOrStdout())
		}}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing while the VMI runs")
	cmd.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace of the VMI")
	return cmd
}

// printConsole copies the VMI's serial log from its launcher Pod's volume
// on its node, which is one of the testbed's nodes on this machine.
func printConsole(ctx context.Context, c client.Client, node *cluster.Cluster, ns, name string, follow bool, out io.Writer) error {
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		return err
	}
	dir := ""
	for uid := range vmi.Status.ActivePods {
		var err error
		root := cluster.HostPath(vmi.Status.NodeName, node.KubeletRoot())
		if dir, err = launcherpod.EmptyDirOnNode(root, uid, launcherpod.VMVolume); err != nil {
			return err
		}
	}
	if dir == "" {
		return fmt.Errorf("VMI %s/%s has no launcher Pod on a node yet", ns, name)
	}
	f, err := openConsoleLog(dir)
	if err != nil {
		return fmt.Errorf("VMI %s/%s: no console log on this node (%w)", ns, name, err)
	}
	defer f.Close()
	for {
		if _, err := io.Copy(out, f); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil || vmi.Status.Phase == v1.Succeeded || vmi.Status.Phase == v1.Failed {
			_, err := io.Copy(out, f)
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// openConsoleLog opens dir/serial.log. The Pod's tenant can write dir: no
// link out of it is followed, and only a regular file is read (a FIFO is
// not waited on).
func openConsoleLog(dir string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	f, err := root.OpenFile("serial.log", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("serial.log in %s is not a regular file", dir)
	}
	return f, nil
}
