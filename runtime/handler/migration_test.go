package handler

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// writePair writes a handler certificate for names, signed by ca, and the
// CA bundle into dir as the handlers' Secret holds them.
func writePair(t *testing.T, dir string, ca *pki.KeyPair, usage []x509.ExtKeyUsage, names ...string) {
	t.Helper()
	leaf, err := pki.Sign(ca, pki.Request{CommonName: names[0], DNSNames: names, Usage: usage, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadTLS: two handlers with the operator's certificate (server and
// client, every node's name) verify each other; a peer without a
// certificate, or with one of another CA, is refused; a certificate
// renewed on disk is used by the next connection.
func TestLoadTLS(t *testing.T) {
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	ca, err := pki.Sign(nil, pki.Request{CommonName: "test CA", IsCA: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Sign(nil, pki.Request{CommonName: "another CA", IsCA: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serverDir, clientDir := t.TempDir(), t.TempDir()
	writePair(t, serverDir, &ca, both, "node1", "node2")
	writePair(t, clientDir, &ca, both, "node1", "node2")
	serverTLS, _ := LoadTLS(serverDir)
	_, clientTLS := LoadTLS(clientDir)

	l, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("ok"))
			}()
		}
	}()
	dial := func(conf *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.Addr().String(), conf)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		// TLS 1.3: the server's refusal of a client certificate comes
		// with the first read.
		_, err = c.Read(make([]byte, 2))
		return err
	}
	if err := dial(clientTLS("node2")); err != nil {
		t.Errorf("a handler dialing another: %v", err)
	}
	if err := dial(&tls.Config{MinVersion: tls.VersionTLS13, ServerName: "node2", RootCAs: clientTLS("node2").RootCAs}); err == nil {
		t.Error("a peer without a certificate was let in")
	}
	if err := dial(clientTLS("node3")); err == nil {
		t.Error("the server passed for a node its certificate does not name")
	}
	writePair(t, clientDir, &other, both, "node1", "node2")
	if err := dial(clientTLS("node2")); err == nil {
		t.Error("a peer with another CA's certificate was let in")
	}
	writePair(t, clientDir, &ca, both, "node1", "node2")
	if err := dial(clientTLS("node2")); err != nil {
		t.Errorf("after the certificate was renewed on disk: %v", err)
	}
}

// TestLimitsOf: the launcher gets KubeVirt's defaults, or the migration
// configuration's values.
func TestLimitsOf(t *testing.T) {
	if got, want := limitsOf(nil), (launcher.MigrationLimits{CompletionTimeoutPerGiB: 150, ProgressTimeout: 150}); got != want {
		t.Errorf("no configuration: %+v, want %+v", got, want)
	}
	got := limitsOf(&v1.VMIMConfigurationOptions{
		CompletionTimeoutPerGiB: ptr.To[int64](20), ProgressTimeout: ptr.To[int64](30),
		BandwidthPerMigration: ptr.To(resource.MustParse("64Mi")), AllowAutoConverge: ptr.To(true), AllowPostCopy: ptr.To(false),
	})
	want := launcher.MigrationLimits{CompletionTimeoutPerGiB: 20, ProgressTimeout: 30, BandwidthMiB: 64, AllowAutoConverge: true}
	if got != want {
		t.Errorf("configured: %+v, want %+v", got, want)
	}
}
