package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// checkIngressSecretsApart: the hosted router ends TLS with an Ingress's
// Secret from the Ingress's own namespace only. A tenant of namespace
// tenant-b who names default's certificate Secret in an Ingress of theirs
// gets the router's default certificate for their host, while default's
// own Ingress naming it is served with it (the control: the router reads
// Ingress Secrets). passIP is the default-ingress passthrough Service's
// address in the infrastructure, domain the ingress domain.
func checkIngressSecretsApart(t *testing.T, hosted kubernetes.Interface, passIP, domain string) {
	t.Helper()
	ctx := context.Background()
	own, stolen := "own."+domain, "stolen."+domain
	kp, err := pki.Sign(nil, pki.Request{CommonName: "tenant-a", DNSNames: []string{own, stolen},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hosted.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-cert"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hosted.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingress := func(ns, name, host string) {
		prefix := networkingv1.PathTypePrefix
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: networkingv1.IngressSpec{
			TLS: []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: "tenant-cert"}},
			Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
		}}
		if _, err := hosted.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ingress("default", "own-cert", own)
	ingress("tenant-b", "stolen-cert", stolen)
	def, err := hosted.CoreV1().Secrets(hc.RouterNamespace).Get(ctx, hc.RouterCertsSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defBlock, _ := pem.Decode(def.Data[corev1.TLSCertKey])
	if defBlock == nil {
		t.Fatalf("secret %s/%s holds no certificate", hc.RouterNamespace, hc.RouterCertsSecret)
	}
	served := func(host string) ([]byte, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(passIP, "443"),
			&tls.Config{ServerName: host, InsecureSkipVerify: true}) //nolint:gosec // the test looks at which certificate is served
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0].Raw, nil
	}
	framework.Eventually(t, time.Minute, "the router serving "+own+" with default/tenant-cert and admitting tenant-b/stolen-cert", func() error {
		got, err := served(own)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, kp.Cert.Raw) {
			return fmt.Errorf("%s served with another certificate", own)
		}
		ing, err := hosted.NetworkingV1().Ingresses("tenant-b").Get(ctx, "stolen-cert", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(ing.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("ingress tenant-b/stolen-cert not admitted yet")
		}
		return nil
	})
	got, err := served(stolen)
	if err != nil {
		t.Fatalf("TLS to %s: %v", stolen, err)
	}
	switch {
	case bytes.Equal(got, kp.Cert.Raw):
		t.Errorf("an Ingress of tenant-b was served with default's certificate Secret")
	case !bytes.Equal(got, defBlock.Bytes):
		t.Errorf("%s served with neither default's certificate nor the router's default one", stolen)
	}
}
