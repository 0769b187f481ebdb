package router

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// certValidity is how long the self-signed default certificate lasts.
const certValidity = 2 * 365 * 24 * time.Hour

// SelfSigned is a certificate and key (PEM) for domain and *.domain,
// signed by itself, valid from now.
func SelfSigned(domain string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "*." + domain, Organization: []string{"tekvirt hosted cluster ingress"}},
		DNSNames:              []string{"*." + domain, domain},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so that clients can trust it as its own authority
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
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
