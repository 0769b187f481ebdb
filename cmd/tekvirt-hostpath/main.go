// Command tekvirt-hostpath is the node's dynamic volume provisioner.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

func main() {
	// --kubeconfig is registered by controller-runtime and read by ctrl.GetConfig.
	var root, node, probeAddr string
	flag.StringVar(&root, "root", "", "directory holding the volumes")
	flag.StringVar(&node, "node", "", "name of this node")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:10270", "address of /healthz and /readyz")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(root, node, probeAddr); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-hostpath:", err)
		os.Exit(1)
	}
}

func run(root, node, probeAddr string) error {
	if root == "" || node == "" {
		return fmt.Errorf("--root and --node are required")
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		HealthProbeBindAddress: probeAddr,
		Metrics:                metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return err
	}
	if err := (&hostpath.ClaimReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("tekvirt-hostpath"), Root: root, Node: node}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&hostpath.VolumeReconciler{Client: mgr.GetClient(), Root: root}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
