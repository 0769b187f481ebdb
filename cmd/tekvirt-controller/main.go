// Command tekvirt-controller is tekvirt's controller manager.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/hyperconverged"
	"github.com/tekvirt/tekvirt/controllers/manager"
	"github.com/tekvirt/tekvirt/controllers/placement"
	"github.com/tekvirt/tekvirt/controllers/vm"
	"github.com/tekvirt/tekvirt/controllers/vmwebhook"
)

func main() {
	var stepImage, probeAddr, metricsAddr, certDir string
	var webhookPort int
	flag.StringVar(&stepImage, "step-image", "", "image reference of tekvirt-step, run by every catalog task")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "address of /metrics; 0 disables")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "directory with tls.crt and tls.key of the VM validating webhook; empty disables it")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port of the VM validating webhook")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(stepImage, probeAddr, metricsAddr, certDir, webhookPort); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-controller:", err)
		os.Exit(1)
	}
}

func run(stepImage, probeAddr, metricsAddr, certDir string, webhookPort int) error {
	if stepImage == "" {
		return fmt.Errorf("--step-image is required")
	}
	mgr, err := manager.New(manager.Options{
		ProbeAddr: probeAddr, MetricsAddr: metricsAddr,
		AddToScheme:    []func(*runtime.Scheme) error{hcov1beta1.AddToScheme, kubevirtv1.AddToScheme, cdiv1.AddToScheme, pipelinev1.AddToScheme},
		WebhookCertDir: certDir, WebhookPort: webhookPort,
	})
	if err != nil {
		return err
	}
	if err := (&hyperconverged.Reconciler{Client: mgr.GetClient(), StepImage: stepImage}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the hyperconverged controller: %w", err)
	}
	if err := (&vm.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the VirtualMachine controller: %w", err)
	}
	if err := (&placement.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up VMI placement: %w", err)
	}
	if err := (&datavolume.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), StepImage: stepImage}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DataVolume controller: %w", err)
	}
	if certDir != "" {
		mgr.GetWebhookServer().Register(vmwebhook.Path, &webhook.Admission{Handler: vmwebhook.Validator{Client: mgr.GetClient()}})
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
