// Command tekvirt-hostpath is the node's dynamic volume provisioner.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/controllers/manager"
)

func main() {
	// --kubeconfig is registered by controller-runtime and read by ctrl.GetConfig.
	var root, sharedRoot, node, probeAddr string
	flag.StringVar(&root, "root", "", "directory holding the volumes")
	flag.StringVar(&sharedRoot, "shared-root", "", "directory holding the shared classes' volumes, one shared file system mounted there on every node (optional)")
	flag.StringVar(&node, "node", "", "name of this node")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:10270", "address of /healthz and /readyz")
	opts := manager.LogOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(root, sharedRoot, node, probeAddr); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-hostpath:", err)
		os.Exit(1)
	}
}

func run(root, sharedRoot, node, probeAddr string) error {
	if root == "" || node == "" {
		return fmt.Errorf("--root and --node are required")
	}
	if sharedRoot != "" {
		if err := hostpath.AnnounceNode(sharedRoot, node); err != nil {
			return err
		}
	}
	mgr, err := manager.New(manager.Options{ProbeAddr: probeAddr})
	if err != nil {
		return err
	}
	if err := (&hostpath.ClaimReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("tekvirt-hostpath"), Root: root, SharedRoot: sharedRoot, Node: node}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&hostpath.VolumeReconciler{Client: mgr.GetClient(), Root: root, SharedRoot: sharedRoot, Node: node}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
