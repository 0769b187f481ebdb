package framework

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeIP is the first node's InternalIP (this machine's address), which Pods reach.
func (f *Framework) NodeIP(t testing.TB) string {
	t.Helper()
	nodes, err := f.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatal("node has no InternalIP")
	return ""
}

// ServeDir serves the files of dir over HTTP on the node's address, which
// Pods reach, and returns its base URL.
func (f *Framework) ServeDir(t testing.TB, dir string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(f.NodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// ServeRegistry runs an OCI registry for the test on the node's
// address behind a selectorless Service in ns, and returns the Service's
// ClusterIP and port: Pods (the bundles resolver) and this process reach it
// there, and a private address is one go-containerregistry speaks plain
// HTTP to, as Tekton's resolver has no option for an insecure registry.
func (f *Framework) ServeRegistry(t testing.TB, ns string) string {
	t.Helper()
	ctx := context.Background()
	ip := f.NodeIP(t)
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := int32(l.Addr().(*net.TCPAddr).Port)
	svc, err := f.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bundles"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5000, TargetPort: intstr.FromInt32(port)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "bundles", Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}}},
		Ports: []discoveryv1.EndpointPort{{Port: &port}}}
	if _, err := f.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	host := net.JoinHostPort(svc.Spec.ClusterIP, "5000")
	// A new connection each time: one kept alive from before kube-proxy
	// had the Service stays with whoever answered then.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	Eventually(t, time.Minute, "the bundle registry at "+host, func() error {
		resp, err := fresh.Get("http://" + host + "/v2/")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		// Until kube-proxy has the Service, whatever answers unrouted
		// addresses on this machine may: only the registry says this.
		if v := resp.Header.Get("Docker-Distribution-API-Version"); resp.StatusCode != http.StatusOK || v != "registry/2.0" {
			return fmt.Errorf("GET /v2/: %s, API version %q", resp.Status, v)
		}
		return nil
	})
	return host
}
