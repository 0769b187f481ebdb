package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tekvirt/tekvirt/contracts/stream"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// serialSocket is QEMU's serial console socket in a VM's directory; it
// serves one client at a time.
const serialSocket = "serial.sock"

// vncSocket is where the VNC server of the VM's display listens in its
// directory.
const vncSocket = "vnc.sock"

// serveConsole attaches the caller to the guest's serial console, for
// callers allowed get on virtualmachineinstances/console; a second attach
// while one is open is refused (409), as QEMU would leave it waiting.
func (s ExecServer) serveConsole(w http.ResponseWriter, r *http.Request) {
	ctx, ns, name := r.Context(), r.PathValue("namespace"), r.PathValue("name")
	d, ok := s.streamTarget(w, r, "console", stream.Console)
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
	s.splice(w, stream.Console, serial)
}

// servePortForward connects the caller to a port of the guest through its
// launcher, for callers allowed get on virtualmachineinstances/portforward.
func (s ExecServer) servePortForward(w http.ResponseWriter, r *http.Request) {
	ctx, ns, name := r.Context(), r.PathValue("namespace"), r.PathValue("name")
	d, ok := s.streamTarget(w, r, "portforward", stream.PortForward)
	if !ok {
		return
	}
	p, err := launcher.ParseGuestPort(r.PathValue("port"), r.PathValue("protocol"))
	if err != nil {
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: %v", ns, name, err), http.StatusBadRequest)
		return
	}
	path := fmt.Sprintf("%s%s/%d", launcher.PortForwardPath, p.Protocol, p.Port)
	// The stream outlives this request's context once switched.
	guest, err := d.client().Stream(context.WithoutCancel(ctx), path, stream.PortForward)
	if err != nil {
		code := http.StatusBadGateway
		var refused *stream.Refused
		if errors.As(err, &refused) && refused.Code/100 == 4 {
			code = refused.Code
		}
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: %v", ns, name, err), code)
		return
	}
	s.splice(w, stream.PortForward, guest)
}

// serveVNC connects the caller to the VNC server of the guest's display,
// for callers allowed get on virtualmachineinstances/vnc. As KubeVirt, a
// new session ends the one open unless it asks preserveSession=true, which
// is refused (409) while one is open.
func (s ExecServer) serveVNC(w http.ResponseWriter, r *http.Request) {
	ctx, ns, name := r.Context(), r.PathValue("namespace"), r.PathValue("name")
	d, ok := s.streamTarget(w, r, "vnc", stream.VNC)
	if !ok {
		return
	}
	if open, busy := s.displays.Load(d.path); busy {
		if r.URL.Query().Get("preserveSession") == "true" {
			http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: a VNC session is already connected", ns, name), http.StatusConflict)
			return
		}
		_ = open.(io.Closer).Close()
	}
	display, err := d.pod.vm.DialUnix(ctx, vncSocket)
	if err != nil {
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: its display: %v", ns, name, err), http.StatusBadGateway)
		return
	}
	client, err := stream.Accept(w, stream.VNC)
	if err != nil {
		display.Close()
		return
	}
	s.displays.Store(d.path, client)
	defer s.displays.CompareAndDelete(d.path, client)
	stream.Splice(client, display)
}

// streamTarget is the VMI directory a stream request of r reaches: the
// caller allowed get on the subresource sub, the request asking for
// protocol, the VMI running on this node; otherwise it has answered.
func (s ExecServer) streamTarget(w http.ResponseWriter, r *http.Request, sub, protocol string) (vmDir, bool) {
	ctx, ns, name := r.Context(), r.PathValue("namespace"), r.PathValue("name")
	if code, err := s.authorize(ctx, r, "get", sub, ns, name); err != nil {
		http.Error(w, err.Error(), code)
		return vmDir{}, false
	}
	if !stream.Wants(w, r, protocol) {
		return vmDir{}, false
	}
	return s.runningHere(ctx, w, ns, name)
}

// splice switches the caller's connection to protocol and copies between
// it and backend until either ends.
func (s ExecServer) splice(w http.ResponseWriter, protocol string, backend io.ReadWriteCloser) {
	client, err := stream.Accept(w, protocol)
	if err != nil {
		backend.Close()
		return
	}
	stream.Splice(client, backend)
}
