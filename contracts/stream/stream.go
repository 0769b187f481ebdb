package stream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The Upgrade values: what the stream carries after the 101.
const (
	// Console is the guest's serial console.
	Console = "tekvirt-serial-console"
	// PortForward is a connection to a port of the guest.
	PortForward = "tekvirt-port-forward"
	// VNC is the guest's display, spoken as RFB.
	VNC = "tekvirt-vnc"
)

// Wants reports whether r asks for protocol; if not it answers 426
// naming it.
func Wants(w http.ResponseWriter, r *http.Request, protocol string) bool {
	if r.Header.Get("Upgrade") == protocol {
		return true
	}
	http.Error(w, "this stream needs Upgrade: "+protocol, http.StatusUpgradeRequired)
	return false
}

// Accept answers r with 101 for protocol and returns the connection, which
// reads what the client sent after its request (bytes the server may have
// buffered included). Close it when done.
func Accept(w http.ResponseWriter, protocol string) (io.ReadWriteCloser, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "the connection cannot be upgraded", http.StatusInternalServerError)
		return nil, errors.New("the connection cannot be upgraded")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, fmt.Errorf("taking over the connection: %w", err)
	}
	// The server's read and idle deadlines are for requests, not streams.
	_ = conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", protocol); err != nil {
		conn.Close()
		return nil, err
	}
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, err
	}
	return &accepted{Conn: conn, in: rw.Reader}, nil
}

type accepted struct {
	net.Conn
	in *bufio.Reader
}

func (a *accepted) Read(p []byte) (int, error) { return a.in.Read(p) }

// Refused is the other side's answer when it did not switch: its status
// code and message.
type Refused struct {
	Code int
	Msg  string
}

func (e *Refused) Error() string { return e.Msg }

// Open sends req asking for protocol and returns the stream, a *Refused
// with the answer's code and message, or the error reaching the server.
func Open(hc *http.Client, req *http.Request, protocol string) (io.ReadWriteCloser, error) {
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			return rwc, nil
		}
		resp.Body.Close()
		return nil, errors.New("the switched connection cannot be written")
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, &Refused{Code: resp.StatusCode, Msg: strings.TrimSpace(string(body))}
}

// Splice copies both ways between a and b until either direction ends,
// then closes both, so that the other direction ends too.
func Splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}
