// Command tekvirt-controller is tekvirt's controller manager.
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

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/hyperconverged"
)

func main() {
	var stepImage, probeAddr, metricsAddr string
	flag.StringVar(&stepImage, "step-image", "", "image reference of tekvirt-step, run by every catalog task")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "address of /metrics; 0 disables")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(stepImage, probeAddr, metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-controller:", err)
		os.Exit(1)
	}
}

func run(stepImage, probeAddr, metricsAddr string) error {
	if stepImage == "" {
		return fmt.Errorf("--step-image is required")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := hcov1beta1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		HealthProbeBindAddress: probeAddr,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := (&hyperconverged.Reconciler{Client: mgr.GetClient(), StepImage: stepImage}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the hyperconverged controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
