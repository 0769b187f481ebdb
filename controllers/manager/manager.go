package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Options configure New.
type Options struct {
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// MetricsAddr serves /metrics; "0" disables it.
	MetricsAddr string
	// MetricsCertDir holds the tls.crt and tls.key /metrics is served
	// with; empty, a self-signed certificate is made at start.
	MetricsCertDir string
	// AddToScheme registers API groups beyond the Kubernetes ones.
	AddToScheme []func(*runtime.Scheme) error
	// Cache narrows what the manager's informers hold (e.g. one node's objects).
	Cache cache.Options
	// WebhookCertDir holds tls.crt and tls.key; set, the manager serves
	// admission webhooks on WebhookPort and is ready only once they are up.
	WebhookCertDir string
	WebhookPort    int
}

// New connects to the cluster (--kubeconfig, or in-cluster) and returns a
// manager with liveness and readiness checks.
func New(o Options) (ctrl.Manager, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the cluster config: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, o.AddToScheme...) {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "0"
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Cache:                  o.Cache,
		HealthProbeBindAddress: o.ProbeAddr,
		// Metrics are served over HTTPS to callers the API server
		// authenticates and authorizes (get on the /metrics URL).
		Metrics: metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: true,
			FilterProvider: filters.WithAuthenticationAndAuthorization,
			CertDir:        o.MetricsCertDir, CertName: "tls.crt", KeyName: "tls.key"},
	}
	if o.WebhookCertDir != "" {
		opts.WebhookServer = webhook.NewServer(webhook.Options{CertDir: o.WebhookCertDir, Port: o.WebhookPort})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	if o.WebhookCertDir != "" {
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// TLSServer is a manager runnable serving Handler over TLS on Addr, for
// servers beside the webhook (an aggregated API, the upload proxy).
type TLSServer struct {
	Name    string
	Addr    string
	TLS     *tls.Config
	Handler http.Handler
	// ReadTimeout bounds reading a whole request; zero for servers that
	// take long request bodies (uploads).
	ReadTimeout time.Duration
	// Limits; zero means the defaults below.
	ReadHeaderTimeout, IdleTimeout time.Duration
	MaxConns                       int
}

// Defaults of TLSServer: a connection that sends no request (not even a
// TLS handshake) within DefaultReadHeaderTimeout, or sits idle between
// requests for DefaultIdleTimeout, is closed, and no more than
// DefaultMaxConns are open at once, so that idle unauthenticated clients
// cannot pin the process's file descriptors.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConns          = 10000
)

// Start serves until ctx ends.
func (s *TLSServer) Start(ctx context.Context) error {
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", s.Name, s.Addr, err)
	}
	return s.Serve(ctx, l)
}

// Serve serves on l until ctx ends.
func (s *TLSServer) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler, TLSConfig: s.TLS,
		ReadTimeout:       s.ReadTimeout,
		ReadHeaderTimeout: orDefault(s.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		IdleTimeout:       orDefault(s.IdleTimeout, DefaultIdleTimeout)}
	maxConns := s.MaxConns
	if maxConns == 0 {
		maxConns = DefaultMaxConns
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	ctrl.LoggerFrom(ctx).Info("serving", "server", s.Name, "addr", l.Addr().String())
	if err := srv.ServeTLS(netutil.LimitListener(l, maxConns), "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s on %s: %w", s.Name, l.Addr(), err)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// NeedLeaderElection is false: every replica serves.
func (s *TLSServer) NeedLeaderElection() bool { return false }
