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
	"k8s.io/apimachinery/pkg/types"
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

func TestStaleDir(t *testing.T) {
	state := func(uid string, f func(*v1.VirtualMachineInstanceMigrationState)) *v1.VirtualMachineInstanceMigrationState {
		ms := &v1.VirtualMachineInstanceMigrationState{MigrationUID: types.UID(uid), SourceNode: "node1", TargetNode: "node2"}
		if f != nil {
			f(ms)
		}
		return ms
	}
	vmi := func(node string, ms *v1.VirtualMachineInstanceMigrationState) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{NodeName: node, MigrationState: ms}}
	}
	prepared := &launcher.Spec{Incoming: true, VMI: vmi("node1", state("m1", nil))}
	for _, tc := range []struct {
		name string
		spec *launcher.Spec
		vmi  *v1.VirtualMachineInstance
		want bool
	}{
		{name: "its migration runs", spec: prepared, vmi: vmi("node1", state("m1", nil)), want: false},
		{name: "completed, not taken over yet", spec: prepared, vmi: vmi("node1", state("m1", func(ms *v1.VirtualMachineInstanceMigrationState) { ms.Completed = true })), want: false},
		{name: "taken over: the VMI runs here", spec: prepared, vmi: vmi("node2", state("m1", func(ms *v1.VirtualMachineInstanceMigrationState) { ms.Completed = true })), want: false},
		{name: "failed", spec: prepared, vmi: vmi("node1", state("m1", func(ms *v1.VirtualMachineInstanceMigrationState) { ms.Failed = true })), want: true},
		{name: "being cancelled", spec: prepared, vmi: vmi("node1", state("m1", func(ms *v1.VirtualMachineInstanceMigrationState) { ms.AbortRequested = true })), want: true},
		{name: "a newer migration to this node", spec: prepared, vmi: vmi("node1", state("m2", nil)), want: true},
		{name: "a newer migration elsewhere", spec: prepared, vmi: vmi("node1", state("m2", func(ms *v1.VirtualMachineInstanceMigrationState) { ms.TargetNode = "node3" })), want: true},
		{name: "the VM's own, migrated away, coming back", spec: &launcher.Spec{VMI: vmi("node2", nil)}, vmi: vmi("node1", state("m2", nil)), want: true},
		{name: "the VM's own, running here", spec: &launcher.Spec{VMI: vmi("node2", nil)}, vmi: vmi("node2", nil), want: false},
		{name: "the VMI not placed yet", spec: &launcher.Spec{VMI: vmi("", nil)}, vmi: vmi("", nil), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := staleDir(tc.spec, tc.vmi, "node2"); got != tc.want {
				t.Fatalf("staleDir = %v, want %v", got, tc.want)
			}
		})
	}
}
