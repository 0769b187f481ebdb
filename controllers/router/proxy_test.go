package router

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestRouter: requests through a Router over real listeners, to a real
// backend at a Service's cluster address (127.0.0.1 stands in for it).
func TestRouter(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		fmt.Fprintf(w, "host=%s path=%s proto=%s", r.Host, r.URL.Path, r.Header.Get("X-Forwarded-Proto"))
	}))
	defer backend.Close()
	_, port, _ := net.SplitHostPort(backend.Listener.Addr().String())
	backendPort, _ := strconv.Atoi(port)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.1",
			Ports: []corev1.ServicePort{{Name: "http", Port: int32(backendPort)}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "down"}, Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.1",
			Ports: []corev1.ServicePort{{Name: "http", Port: int32(closedPort)}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "headless"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
	} {
		if err := services.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	secrets := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	webPool, defaultPool := x509.NewCertPool(), x509.NewCertPool()
	for _, s := range []struct{ ns, name, domain string }{{"a", "web-tls", "apps.c.example.com"}, {"openshift-ingress", "router-certs-default", "example.com"}} {
		crt, key, err := SelfSigned(s.domain, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		pool := webPool
		if s.name == "router-certs-default" {
			pool = defaultPool
		}
		pool.AppendCertsFromPEM(crt)
		if err := secrets.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name, ResourceVersion: "1"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}); err != nil {
			t.Fatal(err)
		}
	}
	r := &Router{Services: corelisters.NewServiceLister(services), Secrets: corelisters.NewSecretLister(secrets),
		DefaultCert: types.NamespacedName{Namespace: "openshift-ingress", Name: "router-certs-default"}, Log: testr.New(t)}
	secure := ingress("a", "secure", time.Hour, "web.apps.c.example.com", path{"/", "web", networkingv1.PathTypePrefix})
	secure.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "web-tls"}}
	r.SetTable(NewTable([]*networkingv1.Ingress{
		secure,
		ingress("a", "plain", time.Hour, "plain.example.com", path{"/down", "down", networkingv1.PathTypePrefix},
			path{"/headless", "headless", networkingv1.PathTypePrefix}, path{"/", "web", networkingv1.PathTypePrefix}),
	}))

	plain := httptest.NewServer(r.HTTP())
	defer plain.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	secureServer := &http.Server{Handler: r.HTTPS(), ReadHeaderTimeout: 5 * time.Second}
	go secureServer.Serve(ln) //nolint:errcheck // ends with Close below
	defer func() { _ = secureServer.Close() }()

	get := func(base, host, path string, pool *x509.CertPool) (int, string, http.Header) {
		t.Helper()
		c := &http.Client{
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s (Host %s): %v", base, path, host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	https := "https://" + ln.Addr().String()

	// TLS ends at the router with the Ingress's certificate (verified
	// against it alone), the backend sees the host the client asked for.
	if code, body, _ := get(https, "web.apps.c.example.com", "/x", webPool); code != 200 || body != "host=web.apps.c.example.com path=/x proto=https" {
		t.Errorf("HTTPS to an Ingress with TLS: %d %q", code, body)
	}
	// A host without a certificate of its own gets the default one.
	if code, body, _ := get(https, "plain.example.com", "/", defaultPool); code != 200 || !strings.Contains(body, "host=plain.example.com") {
		t.Errorf("HTTPS with the default certificate: %d %q", code, body)
	}
	// Plain HTTP to a host with TLS is redirected; without, served.
	if code, _, h := get(plain.URL, "web.apps.c.example.com", "/x?q=1", nil); code != http.StatusPermanentRedirect || h.Get("Location") != "https://web.apps.c.example.com/x?q=1" {
		t.Errorf("HTTP to a host with TLS: %d, Location %q", code, h.Get("Location"))
	}
	if code, body, _ := get(plain.URL, "plain.example.com:80", "/page", nil); code != 200 || body != "host=plain.example.com:80 path=/page proto=http" {
		t.Errorf("HTTP: %d %q", code, body)
	}
	// A client that shuts its side after the request (nc with HTTP/1.0)
	// still gets the answer.
	conn, err := net.Dial("tcp", plain.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("GET /slow HTTP/1.0\r\nHost: plain.example.com\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(conn); err != nil || !strings.HasPrefix(string(b), "HTTP/1.0 200") || !strings.HasSuffix(string(b), "path=/slow proto=http") {
		t.Errorf("a half-closed client's request: %v\n%s", err, b)
	}
	// What cannot be served says why.
	for _, tc := range []struct {
		host, path string
		code       int
		says       string
	}{
		{"nowhere.example.com", "/", http.StatusServiceUnavailable, `no Ingress routes host "nowhere.example.com"`},
		{"plain.example.com", "/down", http.StatusBadGateway, "Service a/down: "},
		{"plain.example.com", "/headless", http.StatusServiceUnavailable, "Service a/headless is headless"},
	} {
		if code, body, _ := get(plain.URL, tc.host, tc.path, nil); code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s%s: %d %q, want %d saying %q", tc.host, tc.path, code, body, tc.code, tc.says)
		}
	}
}
