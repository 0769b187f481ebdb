// Command tekvirt-controller is tekvirt's controller manager.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	templatev1 "github.com/openshift/api/template/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	"github.com/tekvirt/tekvirt/controllers/claimimport"
	"github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/dataimportcron"
	"github.com/tekvirt/tekvirt/controllers/datasource"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/eviction"
	"github.com/tekvirt/tekvirt/controllers/frontproxy"
	"github.com/tekvirt/tekvirt/controllers/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/hostedservices"
	"github.com/tekvirt/tekvirt/controllers/hotplug"
	"github.com/tekvirt/tekvirt/controllers/macpool"
	"github.com/tekvirt/tekvirt/controllers/manager"
	"github.com/tekvirt/tekvirt/controllers/metrics"
	"github.com/tekvirt/tekvirt/controllers/migration"
	"github.com/tekvirt/tekvirt/controllers/nodepool"
	"github.com/tekvirt/tekvirt/controllers/requester"
	"github.com/tekvirt/tekvirt/controllers/subresources"
	"github.com/tekvirt/tekvirt/controllers/uploadproxy"
	"github.com/tekvirt/tekvirt/controllers/uploadtoken"
	"github.com/tekvirt/tekvirt/controllers/vm"
	"github.com/tekvirt/tekvirt/controllers/vmdefaults"
	"github.com/tekvirt/tekvirt/controllers/vmi"
	"github.com/tekvirt/tekvirt/controllers/vmsnapshot"
	"github.com/tekvirt/tekvirt/controllers/vmwebhook"
	"github.com/tekvirt/tekvirt/controllers/workloadupdate"
)

func main() {
	var stepImage, launcherImage, workerImage, corednsImage, routerImage, konnectivityImage, probeAddr, metricsAddr, certDir string
	var webhookPort, apiPort, uploadProxyPort, subresourcesPort int
	flag.StringVar(&stepImage, "step-image", "", "image reference of tekvirt-step, run by every catalog task")
	flag.StringVar(&launcherImage, "launcher-image", "", "image reference of tekvirt-launcher, run by every launcher Pod")
	flag.StringVar(&workerImage, "hosted-worker-image", "", "containerDisk NodePool workers boot unless the pool names one")
	flag.StringVar(&corednsImage, "hosted-coredns-image", "", "the hosted clusters' DNS (CoreDNS) image")
	flag.StringVar(&routerImage, "hosted-router-image", "", "the hosted clusters' default router's image")
	flag.StringVar(&konnectivityImage, "hosted-konnectivity-agent-image", "", "the hosted clusters' Konnectivity agent's image")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "address of /metrics; 0 disables")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "directory with tls.crt and tls.key of the VM validating webhook; empty disables it")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "port of the VM validating webhook")
	flag.IntVar(&apiPort, "api-port", 8443, "port of the upload.cdi.kubevirt.io aggregated API (with --webhook-cert-dir)")
	flag.IntVar(&uploadProxyPort, "uploadproxy-port", 8444, "port of the upload proxy (with --webhook-cert-dir)")
	flag.IntVar(&subresourcesPort, "subresources-port", 8445, "port of the subresources.kubevirt.io aggregated API (with --webhook-cert-dir)")
	opts := manager.LogOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(images{step: stepImage, launcher: launcherImage, worker: workerImage, coredns: corednsImage, router: routerImage, konnectivity: konnectivityImage}, probeAddr, metricsAddr, certDir, ports{webhookPort, apiPort, uploadProxyPort, subresourcesPort}); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-controller:", err)
		os.Exit(1)
	}
}

type ports struct{ webhook, api, uploadProxy, subresources int }

// images are the component images the controller runs.
type images struct{ step, launcher, worker, coredns, router, konnectivity string }

func run(img images, probeAddr, metricsAddr, certDir string, port ports) error {
	if img.step == "" || img.launcher == "" {
		return fmt.Errorf("--step-image and --launcher-image are required")
	}
	stepImage := img.step
	mgr, err := manager.New(manager.Options{
		ProbeAddr: probeAddr, MetricsAddr: metricsAddr,
		AddToScheme:    []func(*runtime.Scheme) error{hcov1beta1.AddToScheme, nacv1.AddToScheme, kubevirtv1.AddToScheme, migrationsv1alpha1.AddToScheme, instancetypev1beta1.AddToScheme, templatev1.AddToScheme, cdiv1.AddToScheme, pipelinev1.AddToScheme, hyperv1.AddToScheme, snapshotv1beta1.AddToScheme, vsv1.AddToScheme},
		WebhookCertDir: certDir, WebhookPort: port.webhook,
	})
	if err != nil {
		return err
	}
	if err := ctrlmetrics.Registry.Register(metrics.Collector{Reader: mgr.GetClient()}); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := setupVMs(mgr, img); err != nil {
		return err
	}
	key, err := uploadKey(mgr)
	if err != nil {
		return err
	}
	if err := setupDisks(mgr, stepImage, key); err != nil {
		return err
	}
	if err := setupHosted(mgr, img); err != nil {
		return err
	}
	if certDir != "" {
		// One call per request for both: a second mutating webhook costs
		// a VM create a third of its admission time.
		mgr.GetWebhookServer().Register(config.MutatingWebhookPath, &webhook.Admission{Handler: admission.MultiMutatingHandler(
			requester.Recorder{Controller: config.ControllerUser}, vmdefaults.Defaulter{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), MACs: &macpool.Pool{Reader: mgr.GetClient()}})})
		mgr.GetWebhookServer().Register(vmwebhook.Path, &webhook.Admission{Handler: vmwebhook.Validator{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}})
		mgr.GetWebhookServer().Register(eviction.Path, &webhook.Admission{Handler: eviction.Webhook{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Log: ctrl.Log.WithName("eviction")}})
		if err := addAPIServers(mgr, certDir, key, port); err != nil {
			return err
		}
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// setupVMs sets up the controllers of VMs: VirtualMachines, their VMIs'
// launcher Pods, evictions, live migrations and workload updates.
func setupVMs(mgr ctrl.Manager, img images) error {
	if err := (&vm.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("tekvirt-controller")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the VirtualMachine controller: %w", err)
	}
	if err := (&eviction.BudgetReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up disruption budgets: %w", err)
	}
	if err := (&eviction.EvacuationReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("tekvirt-controller")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up evacuations: %w", err)
	}
	if err := (&vmi.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("tekvirt-controller"), LauncherImage: img.launcher}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up launcher Pods: %w", err)
	}
	if err := (&hotplug.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("tekvirt-controller"), Image: img.launcher}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up hotplug volumes: %w", err)
	}
	if err := (&workloadupdate.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("tekvirt-controller"), LauncherImage: img.launcher}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the workload updater: %w", err)
	}
	if err := (&migration.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("tekvirt-controller"), LauncherImage: img.launcher}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up live migration: %w", err)
	}
	guest := &subresources.Handlers{TokenFile: handlerTokenFile, CAFile: caBundleFile}
	if err := (&vmsnapshot.SnapshotReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("tekvirt-controller"), Guest: guest}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up VM snapshots: %w", err)
	}
	if err := (&vmsnapshot.RestoreReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("tekvirt-controller")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up VM restores: %w", err)
	}
	return nil
}

// setupDisks sets up the controllers of disks: DataVolumes, annotated
// PVCs, DataSources and DataImportCrons.
func setupDisks(mgr ctrl.Manager, stepImage string, key ed25519.PrivateKey) error {
	if err := (&datavolume.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), StepImage: stepImage, UploadKey: key,
		Recorder: mgr.GetEventRecorder("datavolume-controller")}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DataVolume controller: %w", err)
	}
	if err := (&claimimport.Reconciler{Client: mgr.GetClient(), StepImage: stepImage}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the annotated PVC import: %w", err)
	}
	if err := (&datasource.Reconciler{Client: mgr.GetClient()}).SetupWithManager(context.Background(), mgr); err != nil {
		return fmt.Errorf("setting up the DataSource controller: %w", err)
	}
	if err := (&dataimportcron.Reconciler{Client: mgr.GetClient(), StepImage: stepImage}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the DataImportCron controller: %w", err)
	}
	return nil
}

// setupHosted sets up the HostedCluster and NodePool controllers and the
// publishing of hosted Services.
func setupHosted(mgr ctrl.Manager, img images) error {
	if err := (&hostedcluster.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), StepImage: img.step, CoreDNSImage: img.coredns, RouterImage: img.router, KonnectivityAgentImage: img.konnectivity}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the HostedCluster controller: %w", err)
	}
	if err := (&nodepool.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), WorkerImage: img.worker}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the NodePool controller: %w", err)
	}
	if err := (&hostedservices.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the hosted Services controller: %w", err)
	}
	return nil
}

// uploadKey loads the upload token signing key, reading through to the API
// server since the manager's cache has not started.
func uploadKey(mgr ctrl.Manager) (ed25519.PrivateKey, error) {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, err
	}
	return uploadtoken.LoadOrCreateKey(context.Background(), c, config.Namespace)
}

// The node handlers' audience-bound token and tekvirt's CA bundle, as the
// Deployment mounts them, for the VMI operations of the subresources API.
const (
	handlerTokenFile = "/var/run/secrets/tekvirt.io/handler/token"
	caBundleFile     = "/etc/tekvirt/ca/ca.crt"
)

// addAPIServers serves the aggregated APIs (UploadTokenRequest,
// subresources.kubevirt.io) and the upload proxy.
func addAPIServers(mgr ctrl.Manager, certDir string, key ed25519.PrivateKey, port ports) error {
	apiTLS, allowed, certs, err := frontproxy.ServerTLS(context.Background(), mgr.GetAPIReader(), certDir)
	if err != nil {
		return err
	}
	if err := mgr.Add(certs); err != nil {
		return err
	}
	api := &uploadtoken.API{Key: key, Client: mgr.GetAPIReader(), AllowedNames: allowed, Log: ctrl.Log.WithName("uploadtoken")}
	// Token requests are small; the proxy's uploads are not, so only the
	// API bounds reading a whole request.
	if err := mgr.Add(&manager.TLSServer{Name: "upload token API", Addr: fmt.Sprintf(":%d", port.api), TLS: apiTLS, Handler: api.Handler(), ReadTimeout: 30 * time.Second}); err != nil {
		return err
	}
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	sub := &subresources.API{Client: direct, AllowedNames: allowed, Version: buildVersion(), Log: ctrl.Log.WithName("subresources"),
		Handlers: &subresources.Handlers{TokenFile: handlerTokenFile, CAFile: caBundleFile}}
	if err := mgr.Add(&manager.TLSServer{Name: "subresources API", Addr: fmt.Sprintf(":%d", port.subresources), TLS: apiTLS, Handler: sub.Handler(), ReadTimeout: 30 * time.Second}); err != nil {
		return err
	}
	proxyTLS := apiTLS.Clone()
	proxyTLS.ClientAuth, proxyTLS.ClientCAs = tls.NoClientCert, nil
	proxy := &uploadproxy.Proxy{Client: mgr.GetAPIReader(), PublicKey: key.Public().(ed25519.PublicKey), Log: ctrl.Log.WithName("uploadproxy")}
	return mgr.Add(&manager.TLSServer{Name: "upload proxy", Addr: fmt.Sprintf(":%d", port.uploadProxy), TLS: proxyTLS, Handler: proxy.Handler()})
}

// buildVersion is this binary's version as the Go toolchain recorded it,
// which the subresources API's version endpoint reports.
func buildVersion() version.Info {
	v := version.Info{GitVersion: "v0.0.0-devel", GitTreeState: "clean"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.GitVersion = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.GitCommit = s.Value
		case "vcs.time":
			v.BuildDate = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v.GitTreeState = "dirty"
			}
		}
	}
	return v
}
