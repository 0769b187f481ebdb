// Command tekvirt-handler is the node daemon of the VM runtime: it runs the
// VirtualMachineInstances placed on its node through tekvirt-launcher.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/manager"
	"github.com/tekvirt/tekvirt/runtime/handler"
)

func main() {
	// --kubeconfig is registered by controller-runtime and read by ctrl.GetConfig.
	h := &handler.Handler{}
	ex := &handler.ExecServer{Handler: h}
	var probeAddr string
	var metrics metricsFlags
	var mig migrationFlags
	flag.StringVar(&h.Node, "node", "", "name of this node")
	flag.StringVar(&h.Root, "root", "/var/lib/tekvirt", "directory for the handler's VM files and the containerDisk cache")
	flag.StringVar(&h.KubeletRoot, "kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir, where it keeps launcher Pods' volumes")
	flag.BoolVar(&h.KVM, "kvm", false, "run guests with KVM instead of TCG")
	flag.StringVar(&ex.Addr, "exec-addr", "", "host:port of the guest exec HTTPS endpoint; empty disables it")
	flag.StringVar(&ex.Advertise, "exec-advertise", "", "address announced on the Node for exec (default: --exec-addr)")
	flag.StringVar(&ex.CertFile, "tls-cert-file", "", "serving certificate of the exec endpoint")
	flag.StringVar(&ex.KeyFile, "tls-private-key-file", "", "key of the serving certificate")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "127.0.0.1:10271", "address of /healthz and /readyz")
	flag.StringVar(&metrics.addr, "metrics-bind-address", "0", "address of /metrics (HTTPS; callers authorized for get on /metrics); 0 disables it")
	flag.StringVar(&metrics.certDir, "metrics-cert-dir", "", "directory with the tls.crt and tls.key of /metrics (default: a self-signed certificate)")
	flag.Int64Var(&h.ContainerDiskMaxBytes, "container-disk-max-bytes", 20<<30, "most bytes one containerDisk image may extract to on the node; 0: no limit")
	flag.StringVar(&h.QEMUCapabilitiesDir, "qemu-capabilities-dir", "", "directory of libvirt's QEMU capabilities files probed with the launcher image, handed to each launcher; empty: launchers probe QEMU")
	flag.DurationVar(&h.ContainerDiskIdle, "container-disk-idle", handler.DefaultContainerDiskIdle, "how long a cached containerDisk no VM uses is kept")
	flag.StringVar(&mig.addr, "migration-addr", "", "host:port where live migrations to this node are served (mutual TLS between handlers), and what sources dial; empty disables migration")
	flag.StringVar(&mig.certDir, "migration-cert-dir", "", "directory with the handlers' tls.crt, tls.key and ca.crt for migration connections")
	opts := manager.LogOptions()
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(h, ex, probeAddr, metrics, mig); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-handler:", err)
		os.Exit(1)
	}
}

// metricsFlags say where and with which certificate /metrics is served.
type metricsFlags struct{ addr, certDir string }

// migrationFlags say where and with which certificates live migrations are
// carried.
type migrationFlags struct{ addr, certDir string }

func run(h *handler.Handler, ex *handler.ExecServer, probeAddr string, metrics metricsFlags, mig migrationFlags) error {
	if h.Node == "" {
		return fmt.Errorf("--node is required")
	}
	if err := os.MkdirAll(filepath.Join(h.Root, "vms"), 0o700); err != nil {
		return err
	}
	mgr, err := manager.New(manager.Options{
		ProbeAddr:      probeAddr,
		MetricsAddr:    metrics.addr,
		MetricsCertDir: metrics.certDir,
		AddToScheme:    []func(*runtime.Scheme) error{v1.AddToScheme},
		Cache:          handler.CacheOptions(h.Node),
	})
	if err != nil {
		return err
	}
	h.Client, h.Reader, h.Recorder = mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("tekvirt-handler")
	if ex.Addr == "" {
		ex = nil
	} else if ex.Advertise == "" {
		ex.Advertise = ex.Addr
	}
	if ex != nil {
		h.ExecAddress = ex.Advertise
	}
	if err := ctrlmetrics.Registry.Register(handler.VMIMetrics{Handler: h}); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := h.SetupWithManager(mgr, ex); err != nil {
		return fmt.Errorf("setting up the handler: %w", err)
	}
	if mig.addr != "" {
		if err := h.SetupMigrations(mgr, mig.addr, mig.certDir); err != nil {
			return fmt.Errorf("setting up live migration: %w", err)
		}
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
