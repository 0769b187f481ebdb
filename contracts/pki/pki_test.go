package pki

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func TestSignParseCurrent(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ca, err := Sign(nil, Request{CommonName: "ca", IsCA: true, Lifetime: 100 * time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Sign(nil, Request{CommonName: "other", IsCA: true, Lifetime: 100 * time.Hour}, now)
	req := Request{CommonName: "etcd", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("10.0.0.7")},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, Lifetime: 10 * time.Hour}
	leaf, err := Sign(&ca, req, now)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(leaf.CertPEM, ca.KeyPEM); err == nil {
		t.Error("a certificate parsed with another key")
	}
	moved := req
	moved.IPs = []net.IP{net.ParseIP("10.0.0.8")}
	client := req
	client.Organization = []string{"system:masters"}
	tests := []struct {
		name string
		ca   *x509.Certificate
		req  Request
		at   time.Time
		want bool
	}{
		{"same request", ca.Cert, req, now, true},
		{"another address", ca.Cert, moved, now, false},
		{"another organization", ca.Cert, client, now, false},
		{"another CA", other.Cert, req, now, false},
		{"before 80% of its life", ca.Cert, req, now.Add(7 * time.Hour), true},
		{"past 80% of its life", ca.Cert, req, now.Add(9 * time.Hour), false},
	}
	for _, tt := range tests {
		if got := Current(parsed.Cert, tt.ca, tt.req, tt.at); got != tt.want {
			t.Errorf("%s: Current = %v, want %v", tt.name, got, tt.want)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := parsed.Cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client use: %v", err)
	}
	if !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Error("the CA cannot sign certificates")
	}
	if _, err := Sign(nil, Request{CommonName: "x"}, now); err == nil {
		t.Error("a certificate without a lifetime was signed")
	}
}
