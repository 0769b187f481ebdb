package router

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// Options are a router's settings.
type Options struct {
	// Namespace holds the default certificate's Secret (CertsSecret).
	Namespace, CertsSecret string
	// Domain is the ingress domain: the default certificate's names, and
	// the Ingresses' status address router-default.<Domain>.
	Domain string
	// The listeners' addresses: HTTP, HTTPS and /healthz.
	HTTPAddr, HTTPSAddr, HealthAddr string
	Log                             logr.Logger
}

// Run serves the cluster's Ingresses until ctx ends.
func Run(ctx context.Context, kube kubernetes.Interface, o Options) error {
	made, err := EnsureDefaultCert(ctx, kube, o.Namespace, o.CertsSecret, o.Domain)
	if err != nil {
		return err
	}
	if made {
		o.Log.Info("made the default certificate", "secret", o.Namespace+"/"+o.CertsSecret, "domain", "*."+o.Domain)
	}
	factory := informers.NewSharedInformerFactory(kube, 10*time.Minute)
	// Only TLS Secrets: the router reads no other kind.
	tlsSecrets := informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()
	}))
	ingresses := factory.Networking().V1().Ingresses()
	r := &Router{
		Services:    factory.Core().V1().Services().Lister(),
		Secrets:     tlsSecrets.Core().V1().Secrets().Lister(),
		DefaultCert: types.NamespacedName{Namespace: o.Namespace, Name: o.CertsSecret},
		Log:         o.Log,
	}
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := ingresses.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	tlsSecrets.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watching %v: not synced", typ)
		}
	}
	for typ, ok := range tlsSecrets.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watching %v: not synced", typ)
		}
	}
	go reroute(ctx, kube, ingresses.Lister(), r, "router-default."+o.Domain, changed, o.Log)
	return serve(ctx, r, o)
}

// reroute rebuilds r's table after every change of the Ingresses, and writes
// address into the status of those it serves.
func reroute(ctx context.Context, kube kubernetes.Interface, lister networkinglisters.IngressLister, r *Router, address string, changed <-chan struct{}, log logr.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		all, err := lister.List(labels.Everything())
		if err != nil {
			log.Error(err, "listing Ingresses")
			continue
		}
		t := NewTable(all)
		r.SetTable(t)
		log.V(1).Info("routes rebuilt", "ingresses", len(t.Served))
		for _, ing := range all {
			if !slices.Contains(t.Served, types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}) {
				continue
			}
			if err := setStatus(ctx, kube, ing, address); err != nil {
				log.Error(err, "writing the Ingress's status", "ingress", ing.Namespace+"/"+ing.Name)
			}
		}
	}
}

// setStatus writes address as ing's load-balancer address, as OpenShift
// names its router's canonical host there.
func setStatus(ctx context.Context, kube kubernetes.Interface, ing *networkingv1.Ingress, address string) error {
	want := []networkingv1.IngressLoadBalancerIngress{{Hostname: address}}
	if slices.EqualFunc(ing.Status.LoadBalancer.Ingress, want, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.Hostname == b.Hostname && a.IP == "" && len(a.Ports) == 0
	}) {
		return nil
	}
	ing = ing.DeepCopy()
	ing.Status.LoadBalancer.Ingress = want
	_, err := kube.NetworkingV1().Ingresses(ing.Namespace).UpdateStatus(ctx, ing, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // another replica wrote it, or it is gone: the next event tells
	}
	return err
}

// serve runs the listeners until ctx ends.
func serve(ctx context.Context, r *Router, o Options) error {
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	servers := []*http.Server{
		{Addr: o.HTTPAddr, Handler: r.HTTP(), ReadHeaderTimeout: 30 * time.Second},
		{Addr: o.HTTPSAddr, Handler: r.HTTPS(), TLSConfig: r.TLSConfig(), ReadHeaderTimeout: 30 * time.Second},
		{Addr: o.HealthAddr, Handler: health, ReadHeaderTimeout: 5 * time.Second},
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
		if s.TLSConfig != nil {
			ln = tls.NewListener(ln, s.TLSConfig)
		}
		go func() { errs <- s.Serve(ln) }()
	}
	o.Log.Info("serving", "http", o.HTTPAddr, "https", o.HTTPSAddr, "class", hc.IngressClass, "domain", o.Domain)
	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errAll error
	for _, s := range servers {
		if err := s.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errAll = errors.Join(errAll, err)
		}
	}
	return errAll
}
