package hyperconverged

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestCertificatesRenewAndVerify(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ca, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := issue(ca, []string{"node-a", "node-b"}, true, now)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parsePair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatalf("a pair as the Secret holds it: %v", err)
	}
	if _, err := parsePair(leaf.CertPEM, ca.KeyPEM); err == nil {
		t.Error("a certificate with another's key was accepted")
	}
	serving, err := issue(ca, []string{"node-a", "node-b"}, false, now)
	if err != nil {
		t.Fatal(err)
	}
	if leafCurrent(serving.Cert, ca.Cert, []string{"node-a", "node-b"}, true, now) {
		t.Error("a serving certificate (an older release's handlers') was kept where a client's is wanted too")
	}
	tests := []struct {
		name   string
		ca     *x509.Certificate
		names  []string
		client bool
		at     time.Time
		want   bool
	}{
		{"fresh, same names", ca.Cert, []string{"node-a", "node-b"}, true, now, true},
		{"a node joined", ca.Cert, []string{"node-a", "node-b", "node-c"}, true, now, false},
		{"signed by another CA", other.Cert, []string{"node-a", "node-b"}, true, now, false},
		{"just before 80% of its life", ca.Cert, []string{"node-a", "node-b"}, true, now.Add(23 * 24 * time.Hour), true},
		{"past 80% of its life", ca.Cert, []string{"node-a", "node-b"}, true, now.Add(25 * 24 * time.Hour), false},
		{"a client's too where only a server's is wanted", ca.Cert, []string{"node-a", "node-b"}, false, now, false},
	}
	for _, tt := range tests {
		if got := leafCurrent(parsed.Cert, tt.ca, tt.names, tt.client, tt.at); got != tt.want {
			t.Errorf("%s: leafCurrent = %v, want %v", tt.name, got, tt.want)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle(ca, nil, now))
	if _, err := parsed.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-b", CurrentTime: now}); err != nil {
		t.Errorf("the leaf does not verify with the bundle for node-b: %v", err)
	}
	if _, err := parsed.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-z", CurrentTime: now}); err == nil {
		t.Error("the leaf verified for a name it was not issued for")
	}
}

func TestBundleKeepsThePreviousCAWhileValid(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	old, _ := newCA(now.Add(-300 * 24 * time.Hour))
	current, _ := newCA(now)
	count := func(b []byte) int {
		n := 0
		for {
			var blk *pem.Block
			if blk, b = pem.Decode(b); blk == nil {
				return n
			}
			n++
		}
	}
	if n := count(bundle(current, old.CertPEM, now)); n != 2 {
		t.Errorf("bundle during rotation has %d CAs, want 2", n)
	}
	if n := count(bundle(current, old.CertPEM, now.Add(100*24*time.Hour))); n != 1 {
		t.Errorf("bundle after the old CA expired has %d CAs, want 1", n)
	}
	if n := count(bundle(current, current.CertPEM, now)); n != 1 {
		t.Errorf("bundle with itself as previous has %d CAs, want 1", n)
	}
	if got := renewAt(current.Cert); !got.After(now.Add(290*24*time.Hour)) || !got.Before(now.Add(293*24*time.Hour)) {
		t.Errorf("a CA is renewed at %s, want 80%% into its year", got)
	}
}
