package manager

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// serve runs a TLSServer with short limits on a loopback port.
func serve(t *testing.T, s *TLSServer) string {
	t.Helper()
	// httptest's certificate is all a TLS server needs here.
	ts := httptest.NewTLSServer(nil)
	s.TLS = &tls.Config{Certificates: ts.TLS.Certificates}
	ts.Close()
	s.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return l.Addr().String()
}

// closedByServer waits until the server closes conn (a read ends), or fails.
func closedByServer(t *testing.T, conn net.Conn, within time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 512)
	for {
		_, err := conn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %s", within)
		}
		if err != nil {
			return
		}
	}
}

func TestTLSServerClosesIdleConnections(t *testing.T) {
	addr := serve(t, &TLSServer{Name: "test", ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	// A client that connects and never starts TLS.
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A client that makes one request and keeps the connection.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's own certificate
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("request: %s", resp.Status)
	}
	closedByServer(t, silent, 3*time.Second)
	closedByServer(t, conn, 3*time.Second)
}

func TestTLSServerCapsConnections(t *testing.T) {
	addr := serve(t, &TLSServer{Name: "test", MaxConns: 2, ReadHeaderTimeout: time.Minute})
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	// The third is accepted by the kernel but not served while two are open.
	third, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's own certificate
	if err == nil {
		_ = third.SetDeadline(time.Now().Add(500 * time.Millisecond))
		err = third.Handshake()
		_ = third.Close()
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("third connection: %v, want a handshake timeout", err)
	}
}
