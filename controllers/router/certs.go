package router

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tekvirt/tekvirt/contracts/pki"
)

// certValidity is how long the self-signed default certificate lasts.
const certValidity = 2 * 365 * 24 * time.Hour

// SelfSigned is a certificate and key (PEM) for domain and *.domain,
// signed by itself (so a client can trust it as its own authority), valid
// from now.
func SelfSigned(domain string, now time.Time) (certPEM, keyPEM []byte, err error) {
	kp, err := pki.Sign(nil, pki.Request{
		CommonName: "*." + domain, Organization: []string{"tekvirt hosted cluster ingress"},
		DNSNames: []string{"*." + domain, domain}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, Lifetime: certValidity,
	}, now)
	if err != nil {
		return nil, nil, err
	}
	return kp.CertPEM, kp.KeyPEM, nil
}

// EnsureDefaultCert makes Secret namespace/name, the router's default
// certificate, self-signed for domain, unless it exists (a user's own, or
// another replica's).
func EnsureDefaultCert(ctx context.Context, kube kubernetes.Interface, namespace, name, domain string) (made bool, err error) {
	secrets := kube.CoreV1().Secrets(namespace)
	if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
		if err != nil {
			return false, fmt.Errorf("reading Secret %s/%s: %w", namespace, name, err)
		}
		return false, nil
	}
	crt, key, err := SelfSigned(domain, time.Now())
	if err != nil {
		return false, fmt.Errorf("making the default certificate: %w", err)
	}
	_, err = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("creating Secret %s/%s: %w", namespace, name, err)
	}
	return true, nil
}
