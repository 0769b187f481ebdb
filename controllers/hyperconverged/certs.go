package hyperconverged

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Lifetimes of the operator's CA and of the serving certificates it
// issues. Each is renewed once renewFraction of its life has passed, so a
// certificate is never used near its end and a client that cached the old
// CA bundle has the rest of the old CA's life to pick up the new one.
const (
	caLifetime     = 365 * 24 * time.Hour
	leafLifetime   = 30 * 24 * time.Hour
	renewFraction  = 0.8
	clockSkewGrace = 5 * time.Minute
)

// keyPair is a certificate with its key, parsed and PEM-encoded.
type keyPair struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// renewAt is when c should be replaced.
func renewAt(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * renewFraction))
}

// newCA makes a self-signed CA valid from now.
func newCA(now time.Time) (keyPair, error) {
	return sign(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "tekvirt-ca@" + now.UTC().Format("20060102T150405Z")},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, now, caLifetime)
}

// issue makes a serving certificate for dnsNames signed by ca.
func issue(ca keyPair, dnsNames []string, now time.Time) (keyPair, error) {
	if len(dnsNames) == 0 {
		return keyPair{}, errors.New("a serving certificate needs at least one name")
	}
	return sign(&ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, leafLifetime)
}

// sign fills in the template's serial and validity, makes a key and signs
// it with parent (itself when parent is nil).
func sign(parent *keyPair, tmpl *x509.Certificate, now time.Time, life time.Duration) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkewGrace)
	tmpl.NotAfter = now.Add(life)
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parsePair reads a certificate and its key as the Secrets hold them.
func parsePair(certPEM, keyPEM []byte) (keyPair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, errors.New("no PEM certificate or key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return keyPair{}, err
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return keyPair{}, errors.New("the key does not match the certificate")
	}
	return keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// leafCurrent reports whether leaf may be kept: signed by ca, for exactly
// dnsNames, and not yet due for renewal at now.
func leafCurrent(leaf, ca *x509.Certificate, dnsNames []string, now time.Time) bool {
	return leaf.CheckSignatureFrom(ca) == nil && slices.Equal(leaf.DNSNames, dnsNames) && now.Before(renewAt(leaf))
}

// bundle is the PEM CA bundle clients trust: the current CA, and the
// previous one while it is still valid, so certificates it signed keep
// working until they are reissued.
func bundle(current keyPair, previous []byte, now time.Time) []byte {
	out := bytes.Clone(current.certPEM)
	if b, _ := pem.Decode(previous); b != nil {
		if prev, err := x509.ParseCertificate(b.Bytes); err == nil && now.Before(prev.NotAfter) && !prev.Equal(current.cert) {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: prev.Raw})...)
		}
	}
	return out
}
