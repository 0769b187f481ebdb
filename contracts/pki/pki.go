package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// RenewFraction of a certificate's life after which it is replaced, so
// that none is used near its end; ClockSkewGrace backdates each one.
const (
	RenewFraction  = 0.8
	ClockSkewGrace = 5 * time.Minute
)

// KeyPair is a certificate with its key, parsed and PEM-encoded.
type KeyPair struct {
	Cert            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM []byte
}

// Request describes a certificate to sign.
type Request struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	// Usage: ExtKeyUsageServerAuth, ExtKeyUsageClientAuth or both; empty
	// for a CA.
	Usage    []x509.ExtKeyUsage
	IsCA     bool
	Lifetime time.Duration
}

// RenewAt is when c should be replaced.
func RenewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * RenewFraction))
}

// Sign makes a key and a certificate for r signed by parent (self-signed
// when parent is nil), valid from now.
func Sign(parent *KeyPair, r Request, now time.Time) (KeyPair, error) {
	if r.Lifetime <= 0 {
		return KeyPair{}, fmt.Errorf("certificate %q: no lifetime", r.CommonName)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.CommonName, Organization: r.Organization},
		DNSNames:     r.DNSNames,
		IPAddresses:  r.IPs,
		ExtKeyUsage:  r.Usage,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		NotBefore:    now.Add(-ClockSkewGrace),
		NotAfter:     now.Add(r.Lifetime),
	}
	if r.IsCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return KeyPair{}, fmt.Errorf("signing %s: %w", r.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{
		Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Parse reads a certificate and its key as Secrets hold them.
func Parse(certPEM, keyPEM []byte) (KeyPair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return KeyPair{}, errors.New("no PEM certificate or key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return KeyPair{}, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return KeyPair{}, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return KeyPair{}, errors.New("the key does not match the certificate")
	}
	return KeyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Current reports whether leaf may be kept for r: signed by ca, for exactly
// r's subject, names, addresses and usages, and not yet due for renewal
// at now.
func Current(leaf, ca *x509.Certificate, r Request, now time.Time) bool {
	ips := make([]string, 0, len(r.IPs))
	for _, ip := range r.IPs {
		ips = append(ips, ip.String())
	}
	have := make([]string, 0, len(leaf.IPAddresses))
	for _, ip := range leaf.IPAddresses {
		have = append(have, ip.String())
	}
	return leaf.CheckSignatureFrom(ca) == nil &&
		leaf.Subject.CommonName == r.CommonName && slices.Equal(leaf.Subject.Organization, r.Organization) &&
		slices.Equal(leaf.DNSNames, r.DNSNames) && slices.Equal(have, ips) && slices.Equal(leaf.ExtKeyUsage, r.Usage) && now.Before(RenewAt(leaf))
}
