// Command tekvirt-operator deploys tekvirt for the HyperConverged object:
// the controller, its webhooks and upload API with their certificates, the
// node daemons, the default StorageClass and the catalog.
package main

import (
	"flag"
	"fmt"
	"os"
	"path"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	"github.com/tekvirt/tekvirt/controllers/hyperconverged"
	"github.com/tekvirt/tekvirt/controllers/manager"
)

func main() {
	// --kubeconfig is registered by controller-runtime and read by ctrl.GetConfig.
	images := hyperconverged.Images{}
	for _, p := range hyperconverged.Programs {
		name := path.Base(p)
		flag.Func(strings.TrimPrefix(name, "tekvirt-")+"-image", "image reference of "+name, func(v string) error {
			images[p] = v
			return nil
		})
	}
	var probeAddr, metricsAddr string
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "address of /metrics; 0 disables")
	opts := manager.LogOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(images, probeAddr, metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-operator:", err)
		os.Exit(1)
	}
}

func run(images hyperconverged.Images, probeAddr, metricsAddr string) error {
	if len(images) != len(hyperconverged.Programs) {
		return fmt.Errorf("--controller-image, --step-image, --launcher-image, --handler-image, --hostpath-image, --downloads-image, --router-image, --hosted-release-image, --hosted-worker-image, --hosted-coredns-image, --hosted-konnectivity-agent-image, --network-addons-image and --csi-sidecars-image are required")
	}
	mgr, err := manager.New(manager.Options{
		ProbeAddr: probeAddr, MetricsAddr: metricsAddr,
		AddToScheme: []func(*runtime.Scheme) error{hcov1beta1.AddToScheme, nacv1.AddToScheme, apiextensionsv1.AddToScheme},
		Cache:       hyperconverged.CacheOptions(),
	})
	if err != nil {
		return err
	}
	r := &hyperconverged.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), StepImage: images["github.com/tekvirt/tekvirt/cmd/tekvirt-step"], Images: images}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the HyperConverged controller: %w", err)
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
