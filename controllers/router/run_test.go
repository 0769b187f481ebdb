package router

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// freePort is a port nothing listens on now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRun runs the router against a real API server: it makes its default
// certificate, serves an Ingress created after it started (to a backend
// it reaches through an ExternalName Service, as no cluster address routes
// here), writes its address into the Ingress's status, and leaves another
// class's Ingress alone.
func TestRun(t *testing.T) {
	kube := kubernetes.NewForConfigOrDie(testenv.Start(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{hc.RouterNamespace, "a"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "web %s", r.Host) }))
	defer backend.Close()
	port := backend.Listener.Addr().(*net.TCPAddr).Port
	if _, err := kube.CoreV1().Services("a").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "http", Port: int32(port)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := Options{Namespace: hc.RouterNamespace, CertsSecret: hc.RouterCertsSecret, Domain: "apps.demo.example.com",
		HTTPAddr: freePort(t), HTTPSAddr: freePort(t), HealthAddr: freePort(t), Log: testr.New(t)}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, kube, o) }()

	other := withClass(ingress("a", "nginx", 0, "web.apps.demo.example.com", path{"/", "web", networkingv1.PathTypePrefix}), "nginx")
	served := ingress("a", "web", 0, "web.apps.demo.example.com", path{"/", "web", networkingv1.PathTypePrefix})
	for _, ing := range []*networkingv1.Ingress{other, served} {
		ing.CreationTimestamp = metav1.Time{}
		if _, err := kube.NetworkingV1().Ingresses("a").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the Ingress served over HTTP", func() error {
		req, _ := http.NewRequest(http.MethodGet, "http://"+o.HTTPAddr+"/", nil)
		req.Host = "web.apps.demo.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "web web.apps.demo.example.com" {
			return fmt.Errorf("%s: %q", resp.Status, b)
		}
		return nil
	})
	testenv.Eventually(t, "the Ingress's status", func() error {
		ing, err := kube.NetworkingV1().Ingresses("a").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].Hostname != "router-default.apps.demo.example.com" {
			return fmt.Errorf("status %+v", lb)
		}
		return nil
	})
	if ing, err := kube.NetworkingV1().Ingresses("a").Get(ctx, "nginx", metav1.GetOptions{}); err != nil || len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("another class's Ingress: %v, status %+v", err, ing.Status.LoadBalancer)
	}

	// The default certificate: made, and served to a host without one.
	secret, err := kube.CoreV1().Secrets(hc.RouterNamespace).Get(ctx, hc.RouterCertsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", o.HTTPSAddr, &tls.Config{ServerName: "web.apps.demo.example.com", InsecureSkipVerify: true}) //nolint:gosec // the certificate is compared below
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	want, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	got := conn.ConnectionState().PeerCertificates[0]
	if string(got.Raw) != string(want.Certificate[0]) || got.VerifyHostname("web.apps.demo.example.com") != nil {
		t.Errorf("served %v for %v, want the default certificate of Secret %s", got.Subject, got.DNSNames, hc.RouterCertsSecret)
	}

	resp, err := http.Get("http://" + o.HealthAddr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
