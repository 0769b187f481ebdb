// Command tekvirt-hostpath is the hostpath storage's CSI driver on a node
// (runtime/hostpathcsi), with what remains of the provisioner before it:
// the deletion of the hostPath volumes it made, once released.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
	ctrlmanager "github.com/tekvirt/tekvirt/controllers/manager"
	"github.com/tekvirt/tekvirt/runtime/hostpathcsi"
)

type options struct {
	root, sharedRoot, node, probeAddr string
	csiSocket, registrationDir        string
	kubeletPluginDir                  string
}

func main() {
	// --kubeconfig is registered by controller-runtime and read by ctrl.GetConfig.
	var o options
	flag.StringVar(&o.root, "root", "", "directory holding this node's volumes")
	flag.StringVar(&o.sharedRoot, "shared-root", "", "directory holding the shared classes' volumes, one shared file system mounted there on every node (optional)")
	flag.StringVar(&o.node, "node", "", "name of this node")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "127.0.0.1:10270", "address of /healthz and /readyz")
	flag.StringVar(&o.csiSocket, "csi-socket", "/csi/csi.sock", "unix socket the driver serves CSI on, as this container sees it")
	flag.StringVar(&o.registrationDir, "registration-dir", "", "the kubelet's plugins_registry directory, as this container sees it: the driver registers with the kubelet there (optional)")
	flag.StringVar(&o.kubeletPluginDir, "kubelet-plugin-dir", "/var/lib/kubelet/plugins/"+hostpathcsi.DriverName, "the directory of --csi-socket as the kubelet sees it")
	opts := ctrlmanager.LogOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-hostpath:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.root == "" || o.node == "" {
		return fmt.Errorf("--root and --node are required")
	}
	if o.sharedRoot != "" {
		if err := hostpath.AnnounceNode(o.sharedRoot, o.node); err != nil {
			return err
		}
	}
	mgr, err := ctrlmanager.New(ctrlmanager.Options{ProbeAddr: o.probeAddr})
	if err != nil {
		return err
	}
	if err := (&hostpath.VolumeReconciler{Client: mgr.GetClient(), Root: o.root, SharedRoot: o.sharedRoot, Node: o.node}).SetupWithManager(mgr); err != nil {
		return err
	}
	api := mgr.GetAPIReader()
	d := &hostpathcsi.Driver{
		Node: o.node, Root: o.root, SharedRoot: o.sharedRoot,
		CheckShared: func(ctx context.Context) error { return hostpath.CheckShared(ctx, api, o.sharedRoot, o.node) },
		Placement: func(ctx context.Context, ns, name string) error {
			return hostpath.Placement(ctx, api, o.node, ns, name)
		},
	}
	var regSocket string
	if o.registrationDir != "" {
		regSocket = filepath.Join(o.registrationDir, hostpathcsi.DriverName+"-reg.sock")
	}
	kubeletSocket := filepath.Join(o.kubeletPluginDir, filepath.Base(o.csiSocket))
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return d.Serve(ctx, o.csiSocket, regSocket, kubeletSocket)
	})); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
