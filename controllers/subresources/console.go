package subresources

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/controllers/frontproxy"
)

// PlainStreamProtocol is the websocket subprotocol virtctl speaks for the
// serial console: binary messages of raw bytes both ways.
const PlainStreamProtocol = "plain.kubevirt.io"

// console serves GET virtualmachineinstances/NAME/console: for callers
// allowed get on it, the guest's serial console as a websocket, through
// the handler of the VMI's node.
func (a *API) console(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := a.authorize(ctx, "get", "virtualmachineinstances", "console", ns, name); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	if vmi.Status.Phase != v1.Running {
		frontproxy.WriteStatus(w, vmiConflict(name, "VMI is not running"))
		return
	}
	serial, err := a.Handlers.stream(context.WithoutCancel(ctx), vmi, "console")
	if err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	defer serial.Close()
	u, _ := frontproxy.User(ctx)
	a.Log.Info("console attached", "namespace", ns, "name", name, "user", u.Username)
	websocket.Server{
		Handshake: func(cfg *websocket.Config, _ *http.Request) error {
			for _, p := range cfg.Protocol {
				if p == PlainStreamProtocol {
					cfg.Protocol = []string{p}
					return nil
				}
			}
			cfg.Protocol = nil
			return nil
		},
		Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			// The server's read deadline is for requests, not streams.
			_ = ws.SetDeadline(time.Time{})
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(serial, ws); done <- struct{}{} }()
			go func() { _, _ = io.Copy(ws, serial); done <- struct{}{} }()
			<-done
		},
	}.ServeHTTP(w, r)
	a.Log.Info("console detached", "namespace", ns, "name", name, "user", u.Username)
}

// stream opens op of the handler running vmi as a byte stream (the
// handler answers 101 Switching Protocols), or returns its refusal.
func (h *Handlers) stream(ctx context.Context, vmi *v1.VirtualMachineInstance, op string) (io.ReadWriteCloser, error) {
	hc, req, err := h.request(ctx, vmi, http.MethodGet, op, nil)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", guestexec.ConsoleProtocol)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("reaching the handler of node %s: %v", vmi.Status.NodeName, err))
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if rwc, ok := resp.Body.(io.ReadWriteCloser); ok {
			return rwc, nil
		}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode == http.StatusConflict {
		return nil, vmiConflict(vmi.Name, msg)
	}
	return nil, apierrors.NewInternalError(fmt.Errorf("the handler of node %s: %s", vmi.Status.NodeName, msg))
}
