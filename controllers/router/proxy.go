package router

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Router serves requests by its current Table.
type Router struct {
	// Services and Secrets are read for backends and certificates.
	Services corelisters.ServiceLister
	Secrets  corelisters.SecretLister
	// DefaultCert is the Secret of the certificate served for hosts no
	// Ingress gives one to.
	DefaultCert types.NamespacedName
	// Transport carries requests to backends; when nil, one with
	// timeouts (transport).
	Transport http.RoundTripper
	Log       logr.Logger

	table atomic.Pointer[Table]
	// certs caches parsed certificates by Secret and resourceVersion.
	certs            sync.Map
	once             sync.Once
	defaultTransport http.RoundTripper
}

// SetTable replaces the routes.
func (r *Router) SetTable(t *Table) { r.table.Store(t) }

// Table is the current routes (empty before the first SetTable).
func (r *Router) Table() *Table {
	if t := r.table.Load(); t != nil {
		return t
	}
	return NewTable(nil)
}

// HTTP serves plain HTTP: a host with a certificate is redirected to
// HTTPS, the rest proxied.
func (r *Router) HTTP() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, ok := r.Table().Secret(hostOf(req)); ok {
			u := *req.URL
			u.Scheme, u.Host = "https", req.Host
			http.Redirect(w, req, u.String(), http.StatusPermanentRedirect)
			return
		}
		r.serve(w, req)
	})
}

// HTTPS serves requests over TLS (TLSConfig).
func (r *Router) HTTPS() http.Handler { return http.HandlerFunc(r.serve) }

func (r *Router) serve(w http.ResponseWriter, req *http.Request) {
	host := hostOf(req)
	b, ok := r.Table().Route(host, req.URL.Path)
	if !ok {
		http.Error(w, fmt.Sprintf("no Ingress routes host %q, path %q", host, req.URL.Path), http.StatusServiceUnavailable)
		return
	}
	target, err := r.address(b)
	if err != nil {
		r.Log.V(1).Info("backend unavailable", "host", host, "path", req.URL.Path, "err", err)
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	// net/http ends a request's context when the client shuts its side of
	// the connection after the request (HTTP/1.0 clients such as nc do),
	// which would abort the proxying; the answer is waited for as HAProxy
	// waits (the transport's response-header timeout bounds it), and a
	// client really gone fails the copy of the answer instead. (A context
	// that can never end would make ReverseProxy watch CloseNotify, which
	// fires on the same shutdown.)
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	defer cancel()
	req = req.WithContext(ctx)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: target})
			pr.Out.Host = pr.In.Host // the backend sees the name the client asked for
			pr.SetXForwarded()
		},
		Transport: r.transport(),
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			r.Log.V(1).Info("backend failed", "host", host, "service", b.Namespace+"/"+b.Service, "err", err)
			http.Error(w, fmt.Sprintf("backend Service %s/%s: %v", b.Namespace, b.Service, err), http.StatusBadGateway)
		},
	}
	proxy.ServeHTTP(w, req)
}

// transport is r.Transport, or one with timeouts that never goes through
// an environment's proxy.
func (r *Router) transport() http.RoundTripper {
	if r.Transport != nil {
		return r.Transport
	}
	r.once.Do(func() {
		r.defaultTransport = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost:   32,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: time.Minute,
		}
	})
	return r.defaultTransport
}

// address is the host:port requests to b go to: its Service's cluster
// address (kube-proxy picks an endpoint), or its external name.
func (r *Router) address(b Backend) (string, error) {
	svc, err := r.Services.Services(b.Namespace).Get(b.Service)
	if err != nil {
		return "", fmt.Errorf("backend Service %s/%s: %w", b.Namespace, b.Service, err)
	}
	port, err := servicePort(svc, b.Port)
	if err != nil {
		return "", err
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(port))), nil
	case svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone:
		return "", fmt.Errorf("backend Service %s/%s is headless: the router sends to a Service's cluster address", b.Namespace, b.Service)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))), nil
}

// servicePort is the port of svc that p names, by name or number.
func servicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) (int32, error) {
	for _, sp := range svc.Spec.Ports {
		if (p.Name != "" && sp.Name == p.Name) || (p.Name == "" && sp.Port == p.Number) {
			return sp.Port, nil
		}
	}
	if p.Name == "" && svc.Spec.Type == corev1.ServiceTypeExternalName {
		return p.Number, nil
	}
	return 0, fmt.Errorf("backend Service %s/%s has no port %s", svc.Namespace, svc.Name, portString(p))
}

func portString(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return strconv.Quote(p.Name)
	}
	return strconv.Itoa(int(p.Number))
}

// TLSConfig picks each connection's certificate by its server name: the
// one of the Ingress that names the host, else the default.
func (r *Router) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if s, ok := r.Table().Secret(hello.ServerName); ok {
				c, err := r.certificate(s)
				if err == nil {
					return c, nil
				}
				r.Log.Info("serving the default certificate", "host", hello.ServerName, "err", err)
			}
			return r.certificate(r.DefaultCert)
		},
	}
}

// certificate is the parsed key pair of Secret s.
func (r *Router) certificate(s types.NamespacedName) (*tls.Certificate, error) {
	secret, err := r.Secrets.Secrets(s.Namespace).Get(s.Name)
	if err != nil {
		return nil, fmt.Errorf("TLS Secret %s: %w", s, err)
	}
	key := s.String() + "@" + secret.ResourceVersion
	if c, ok := r.certs.Load(key); ok {
		return c.(*tls.Certificate), nil
	}
	if secret.Type != corev1.SecretTypeTLS {
		return nil, fmt.Errorf("TLS Secret %s is of type %q, not %s", s, secret.Type, corev1.SecretTypeTLS)
	}
	c, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("TLS Secret %s: %w", s, err)
	}
	r.certs.Range(func(k, _ any) bool { // older versions of the Secret
		if old := k.(string); len(old) > len(s.String()) && old[:len(s.String())+1] == s.String()+"@" {
			r.certs.Delete(k)
		}
		return true
	})
	r.certs.Store(key, &c)
	return &c, nil
}

// hostOf is the request's host without its port.
func hostOf(req *http.Request) string {
	h, _, err := net.SplitHostPort(req.Host)
	if err != nil {
		return req.Host // no port
	}
	return h
}
