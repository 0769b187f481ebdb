package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// certAuthority signs the cluster's certificates.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// certRequest describes one leaf certificate.
type certRequest struct {
	file   string // base name under pki/, without extension
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
}

// loadOrCreateCA reuses pki/<name>.{crt,key} when present so a restarted
// cluster keeps trusting the kubeconfigs users already hold.
func loadOrCreateCA(dir, name string) (*certAuthority, error) {
	crtPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if cert, key, err := readPair(crtPath, keyPath); err == nil {
		return &certAuthority{cert: cert, key: key}, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "tekvirt-" + name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePair(crtPath, keyPath, der, key); err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key}, nil
}

// issue writes pki/<file>.{crt,key} unless a valid pair signed by ca with the
// same names is already there.
func (ca *certAuthority) issue(dir string, r certRequest) error {
	crtPath, keyPath := filepath.Join(dir, r.file+".crt"), filepath.Join(dir, r.file+".key")
	if cert, _, err := readPair(crtPath, keyPath); err == nil && cert.CheckSignatureFrom(ca.cert) == nil &&
		sameNames(cert, r) && time.Until(cert.NotAfter) > 24*time.Hour {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if r.server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.cn, Organization: r.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		DNSNames:     r.dns,
		IPAddresses:  r.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return fmt.Errorf("signing %s: %w", r.file, err)
	}
	return writePair(crtPath, keyPath, der, key)
}

func sameNames(cert *x509.Certificate, r certRequest) bool {
	if cert.Subject.CommonName != r.cn || !slices.Equal(cert.Subject.Organization, r.orgs) ||
		len(cert.DNSNames) != len(r.dns) || len(cert.IPAddresses) != len(r.ips) {
		return false
	}
	for i := range r.ips {
		if !cert.IPAddresses[i].Equal(r.ips[i]) {
			return false
		}
	}
	return true
}

// ensureServiceAccountKey creates the RSA key pair that signs service account tokens.
func ensureServiceAccountKey(dir string) error {
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if _, err := os.Stat(keyPath); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

func readPair(crtPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	crtPEM, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("bad PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func writePair(crtPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}
