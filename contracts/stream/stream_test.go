package stream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOpenAccept: a client asking for the protocol gets a stream carrying
// bytes both ways; one asking for another is refused with 426 naming it.
func TestOpenAccept(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Wants(w, r, PortForward) {
			return
		}
		c, err := Accept(w, PortForward)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, strings.ToUpper(line))
	}))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	s, err := Open(srv.Client(), req, PortForward)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(s, "hello\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := bufio.NewReader(s).ReadString('\n')
	if got != "HELLO\n" {
		t.Errorf("echo %q, want HELLO", got)
	}
	s.Close()

	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	_, err = Open(srv.Client(), req, Console)
	var refused *Refused
	if !errors.As(err, &refused) || refused.Code != http.StatusUpgradeRequired || !strings.Contains(refused.Msg, PortForward) {
		t.Errorf("asking for the console: %v, want 426 naming %s", err, PortForward)
	}
}

// TestSpliceEndsBoth: bytes pass, and when one side ends the other is
// closed too.
func TestSpliceEndsBoth(t *testing.T) {
	a, aPeer := net.Pipe()
	b, bPeer := net.Pipe()
	done := make(chan struct{})
	go func() { Splice(a, b); close(done) }()
	go func() { _, _ = io.WriteString(aPeer, "bytes"); aPeer.Close() }()
	got, err := io.ReadAll(bPeer)
	if err != nil || string(got) != "bytes" {
		t.Errorf("b's peer read %q, %v; want the bytes, then the end", got, err)
	}
	<-done
}
