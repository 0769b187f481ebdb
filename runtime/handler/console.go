package handler

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
)

// ConsoleProtocol is the Upgrade a console request asks for.
const ConsoleProtocol = guestexec.ConsoleProtocol

// serialSocket is QEMU's serial console socket in a VM's directory; it
// serves one client at a time.
const serialSocket = "serial.sock"

// serveConsole attaches the caller to the guest's serial console, for
// callers allowed get on virtualmachineinstances/console; a second attach
// while one is open is refused (409), as QEMU would leave it waiting.
func (s ExecServer) serveConsole(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if code, err := s.authorize(ctx, r, "get", "console", ns, name); err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	if r.Header.Get("Upgrade") != ConsoleProtocol {
		http.Error(w, "the console needs Upgrade: "+ConsoleProtocol, http.StatusUpgradeRequired)
		return
	}
	d, ok := s.runningHere(ctx, w, ns, name)
	if !ok {
		return
	}
	if _, busy := s.consoles.LoadOrStore(d.path, true); busy {
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: a console is already connected", ns, name), http.StatusConflict)
		return
	}
	defer s.consoles.Delete(d.path)
	serial, err := d.pod.vm.DialUnix(ctx, serialSocket)
	if err != nil {
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: its serial console: %v", ns, name, err), http.StatusBadGateway)
		return
	}
	defer serial.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "the connection cannot be upgraded", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	// The server's read and idle deadlines are for requests, not streams.
	_ = conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", ConsoleProtocol); err != nil || rw.Flush() != nil {
		return
	}
	splice(conn, rw, serial)
}

// splice copies between a client (reading through its buffered reader,
// which may hold bytes already sent) and the serial socket until either
// side ends.
func splice(client net.Conn, in io.Reader, serial net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(serial, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, serial); done <- struct{}{} }()
	<-done
}
