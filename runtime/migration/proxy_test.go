package migration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/runtime/podnet"
)

// podNamespace is a fresh network namespace with its loopback up, as a
// launcher Pod's; it needs root.
func podNamespace(t testing.TB, role string) *os.File {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	name := fmt.Sprintf("tekvirt-test-migration-%s-%d", role, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// handlerTLS is what the handlers share: a certificate of the CA for
// every node's name, for serving and as a client.
type handlerTLS struct {
	pool   *x509.CertPool
	leaf   tls.Certificate
	server *tls.Config
}

func newHandlerTLS(t testing.TB) handlerTLS {
	t.Helper()
	now := time.Now()
	ca, err := pki.Sign(nil, pki.Request{CommonName: "test CA", IsCA: true, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.Sign(&ca, pki.Request{CommonName: "node1", DNSNames: []string{"node1", "node2"},
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return handlerTLS{pool: pool, leaf: cert, server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}}
}

func (h handlerTLS) client(name string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{h.leaf}, RootCAs: h.pool, ServerName: name, MinVersion: tls.VersionTLS13}
}

// servePod serves stream st on the Pod's loopback as QEMU would listen
// there, each connection by handle, which closes it.
func servePod(t testing.TB, ns *os.File, st Stream, handle func(net.Conn)) {
	t.Helper()
	l, err := podnet.Listen(ns, "tcp", st.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
}

// echoSHA serves stream st: it reads everything, then answers with the
// SHA-256 of it.
func echoSHA(t *testing.T, ns *os.File, st Stream) {
	t.Helper()
	servePod(t, ns, st, func(c net.Conn) {
		defer func() { _ = c.Close() }()
		h := sha256.New()
		_, _ = io.Copy(h, c)
		_, _ = c.Write(h.Sum(nil))
	})
}

func serve(t *testing.T, srv *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); srv.Close() })
	go func() { _ = srv.Serve(l) }()
	return l.Addr().String()
}

// TestStreamsReachTheTargetPod: a connection on the source Pod's loopback
// arrives, through both proxies, on the same port of the target Pod's
// loopback, every byte of it both ways, with the end of each direction
// passed on.
func TestStreamsReachTheTargetPod(t *testing.T) {
	src, dst := podNamespace(t, "src"), podNamespace(t, "dst")
	creds := newHandlerTLS(t)
	for _, st := range Streams {
		echoSHA(t, dst, st)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := &Server{TLS: creds.server, Log: log}
	addr := serve(t, srv)
	srv.Expect("mig-1", dst)
	proxy, err := ListenSource(src, "mig-1", addr, creds.client("node2"), log, Streams...)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	data := bytes.Repeat([]byte("tekvirt migration "), 1<<16) // 1.1 MiB
	want := sha256.Sum256(data)
	for _, st := range Streams {
		c, err := podnet.Dial(context.Background(), src, "tcp", st.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		_ = c.Close()
		if err != nil || !bytes.Equal(got, want[:]) {
			t.Fatalf("stream %s: answer %x (%v), want the SHA-256 of what was sent, %x", st, got, err, want)
		}
	}
}

// TestServerRefusesWhatItDoesNotExpect: without a handler's certificate,
// no stream passes; with one, a migration the node does not expect (or
// no longer does) reaches nothing.
func TestServerRefusesWhatItDoesNotExpect(t *testing.T) {
	dst := podNamespace(t, "dst")
	creds := newHandlerTLS(t)
	echoSHA(t, dst, Memory)
	srv := &Server{TLS: creds.server, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	addr := serve(t, srv)
	srv.Expect("mig-1", dst)

	send := func(conf *tls.Config, raw bool, h header) ([]byte, error) {
		var c net.Conn
		var err error
		if raw {
			c, err = net.Dial("tcp", addr)
		} else {
			c, err = tls.Dial("tcp", addr, conf)
		}
		if err != nil {
			return nil, err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := writeHeader(c, h); err != nil {
			return nil, err
		}
		if _, err := c.Write([]byte("payload")); err != nil {
			return nil, err
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		return io.ReadAll(c)
	}
	sum := sha256.Sum256([]byte("payload"))
	if got, err := send(creds.client("node2"), false, header{Key: "mig-1", Stream: Memory}); err != nil || !bytes.Equal(got, sum[:]) {
		t.Fatalf("an expected stream: %x, %v", got, err)
	}
	noCert := &tls.Config{RootCAs: creds.pool, ServerName: "node2", MinVersion: tls.VersionTLS13}
	for name, tc := range map[string]struct {
		conf *tls.Config
		raw  bool
		h    header
	}{
		"no client certificate":     {conf: noCert, h: header{Key: "mig-1", Stream: Memory}},
		"plain TCP":                 {raw: true, h: header{Key: "mig-1", Stream: Memory}},
		"a migration not expected":  {conf: creds.client("node2"), h: header{Key: "mig-2", Stream: Memory}},
		"a stream that is not ours": {conf: creds.client("node2"), h: header{Key: "mig-1", Stream: "ssh"}},
	} {
		if got, _ := send(tc.conf, tc.raw, tc.h); len(got) > 0 {
			t.Errorf("%s: got %q through", name, got)
		}
	}
	srv.Forget("mig-1")
	if got, _ := send(creds.client("node2"), false, header{Key: "mig-1", Stream: Memory}); len(got) > 0 {
		t.Errorf("after Forget: got %q through", got)
	}
}

// TestSourceCloseEndsItsStreams: closed, the source proxy no longer
// listens on the Pod's loopback and ends the connections it carried.
func TestSourceCloseEndsItsStreams(t *testing.T) {
	src, dst := podNamespace(t, "src"), podNamespace(t, "dst")
	creds := newHandlerTLS(t)
	echoSHA(t, dst, Memory)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := &Server{TLS: creds.server, Log: log}
	srv.Expect("mig-1", dst)
	proxy, err := ListenSource(src, "mig-1", serve(t, srv), creds.client("node2"), log, Memory)
	if err != nil {
		t.Fatal(err)
	}
	c, err := podnet.Dial(context.Background(), src, "tcp", Memory.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("in flight")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the stream reaches the target
	proxy.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a stream carried on after the proxy closed")
	}
	if _, err := podnet.Dial(context.Background(), src, "tcp", Memory.Addr()); err == nil {
		t.Error("the source Pod's loopback still listens after Close")
	}
}
