// Command tekvirt-router is a hosted cluster's default router (package
// router): it serves the cluster's Ingresses on HTTP and HTTPS behind the
// NodePort Service the infrastructure passes *.apps.<name>.<baseDomain>
// through to.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/router"
)

func main() {
	o := router.Options{Log: logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil))}
	flag.StringVar(&o.Domain, "domain", "", "the ingress domain (apps.<cluster>.<baseDomain>): the default certificate's names and the Ingresses' address")
	flag.StringVar(&o.Namespace, "namespace", hc.RouterNamespace, "the namespace of the default certificate's Secret")
	flag.StringVar(&o.CertsSecret, "default-certificate", hc.RouterCertsSecret, "the Secret (kubernetes.io/tls) served to hosts no Ingress has a certificate for; made self-signed when absent")
	flag.StringVar(&o.HTTPAddr, "http-address", ":"+strconv.Itoa(hc.RouterHTTPPort), "the HTTP listener")
	flag.StringVar(&o.HTTPSAddr, "https-address", ":"+strconv.Itoa(hc.RouterHTTPSPort), "the HTTPS listener")
	flag.StringVar(&o.HealthAddr, "health-address", ":"+strconv.Itoa(hc.RouterHealthPort), "the listener of /healthz")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-router:", err)
		os.Exit(1)
	}
}

func run(o router.Options) error {
	if o.Domain == "" {
		return fmt.Errorf("--domain is required")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return router.Run(ctx, kube, o)
}
