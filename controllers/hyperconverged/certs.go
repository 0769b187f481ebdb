package hyperconverged

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"time"

	"github.com/tekvirt/tekvirt/contracts/pki"
)

// Lifetimes of the operator's CA and of the serving certificates it
// issues. Each is renewed once pki.RenewFraction of its life has passed, so a
// certificate is never used near its end and a client that cached the old
// CA bundle has the rest of the old CA's life to pick up the new one.
const (
	caLifetime   = 365 * 24 * time.Hour
	leafLifetime = 30 * 24 * time.Hour
)

// keyPair is a certificate with its key, parsed and PEM-encoded.
type keyPair = pki.KeyPair

// newCA makes a self-signed CA valid from now.
func newCA(now time.Time) (keyPair, error) {
	return pki.Sign(nil, pki.Request{CommonName: "tekvirt-ca@" + now.UTC().Format("20060102T150405Z"), IsCA: true, Lifetime: caLifetime}, now)
}

// servingRequest is the certificate of a server named dnsNames; a
// client too when asked (the handlers, which connect to each other to
// carry live migrations).
func servingRequest(dnsNames []string, client bool) pki.Request {
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if client {
		usage = append(usage, x509.ExtKeyUsageClientAuth)
	}
	return pki.Request{CommonName: dnsNames[0], DNSNames: dnsNames, Usage: usage, Lifetime: leafLifetime}
}

// issue makes a serving certificate for dnsNames signed by ca.
func issue(ca keyPair, dnsNames []string, client bool, now time.Time) (keyPair, error) {
	if len(dnsNames) == 0 {
		return keyPair{}, errors.New("a serving certificate needs at least one name")
	}
	return pki.Sign(&ca, servingRequest(dnsNames, client), now)
}

// parsePair reads a certificate and its key as the Secrets hold them.
func parsePair(certPEM, keyPEM []byte) (keyPair, error) { return pki.Parse(certPEM, keyPEM) }

// renewAt is when c should be replaced.
func renewAt(c *x509.Certificate) time.Time { return pki.RenewAt(c) }

// leafCurrent reports whether leaf may be kept: signed by ca, for exactly
// dnsNames and usages, and not yet due for renewal at now.
func leafCurrent(leaf, ca *x509.Certificate, dnsNames []string, client bool, now time.Time) bool {
	return len(dnsNames) > 0 && pki.Current(leaf, ca, servingRequest(dnsNames, client), now)
}

// bundle is the PEM CA bundle clients trust: the current CA, and the
// previous one while it is still valid, so certificates it signed keep
// working until they are reissued.
func bundle(current keyPair, previous []byte, now time.Time) []byte {
	out := bytes.Clone(current.CertPEM)
	if b, _ := pem.Decode(previous); b != nil {
		if prev, err := x509.ParseCertificate(b.Bytes); err == nil && now.Before(prev.NotAfter) && !prev.Equal(current.Cert) {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: prev.Raw})...)
		}
	}
	return out
}
