package subresources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/stream"
	"github.com/tekvirt/tekvirt/controllers/frontproxy"
)

// PlainStreamProtocol is the websocket subprotocol virtctl speaks for the
// serial console, port-forward and VNC: binary messages of raw bytes both
// ways.
const PlainStreamProtocol = "plain.kubevirt.io"

// streamKind is one of the streams served: the subresource, the Upgrade
// asked of the node handler, and the VMI's state it needs.
type streamKind struct {
	sub      string
	protocol string
	// op is the handler's path under the VMI for r (port-forward's
	// carries the port and protocol) and its query.
	op func(r *http.Request) (string, url.Values)
	// check refuses a VMI the stream cannot reach.
	check func(vmi *v1.VirtualMachineInstance) error
}

var (
	consoleStream = streamKind{sub: "console", protocol: stream.Console,
		op: func(*http.Request) (string, url.Values) { return "console", nil }, check: vmiRunning}
	portForwardStream = streamKind{sub: "portforward", protocol: stream.PortForward, op: portForwardOp,
		check: func(vmi *v1.VirtualMachineInstance) error {
			if err := vmiRunning(vmi); err != nil {
				return err
			}
			if hasCondition(vmi, v1.VirtualMachineInstancePaused) {
				return vmiConflict(vmi.Name, "VMI is paused")
			}
			return nil
		}}
	vncStream = streamKind{sub: "vnc", protocol: stream.VNC,
		op: func(r *http.Request) (string, url.Values) {
			return "vnc", url.Values{"preserveSession": {r.URL.Query().Get("preserveSession")}}
		},
		check: func(vmi *v1.VirtualMachineInstance) error {
			if a := vmi.Spec.Domain.Devices.AutoattachGraphicsDevice; a != nil && !*a {
				return apierrors.NewBadRequest("No graphics devices are present.")
			}
			if vmi.Status.Phase != v1.Running {
				return apierrors.NewBadRequest("VMI is not running")
			}
			return nil
		}}
)

func vmiRunning(vmi *v1.VirtualMachineInstance) error {
	if vmi.Status.Phase != v1.Running {
		return vmiConflict(vmi.Name, "VMI is not running")
	}
	return nil
}

// portForwardOp is the handler's path of a port-forward: the port, and the
// protocol when one is named (the handler checks both).
func portForwardOp(r *http.Request) (string, url.Values) {
	op := "portforward/" + r.PathValue("port")
	if p := r.PathValue("protocol"); p != "" {
		op += "/" + p
	}
	return op, nil
}

// serveStream serves kind on a VMI (resource virtualmachineinstances) or on
// the VMI of a VM (virtualmachines) for callers allowed get on that
// resource's subresource: a websocket to the VMI's node handler's stream.
func (a *API) serveStream(resource string, kind streamKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if err := a.authorize(ctx, "get", resource, kind.sub, ns, name); err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		vmi, err := a.streamTarget(ctx, resource, ns, name)
		if err == nil {
			err = kind.check(vmi)
		}
		if err == nil && !isWebsocket(r) {
			err = apierrors.NewBadRequest(fmt.Sprintf("%s is a websocket stream: ask with Upgrade: websocket and subprotocol %s", kind.sub, PlainStreamProtocol))
		}
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		// The stream outlives this request's context once switched.
		op, query := kind.op(r)
		backend, err := a.Handlers.stream(context.WithoutCancel(ctx), vmi, op, query, kind.protocol)
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		defer backend.Close()
		u, _ := frontproxy.User(ctx)
		log := a.Log.WithValues("stream", kind.sub, "namespace", ns, "name", name, "user", u.Username)
		log.Info("stream opened", "op", op)
		websocket.Server{Handshake: plainProtocol, Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			// The server's read deadline is for requests, not streams.
			_ = ws.SetDeadline(time.Time{})
			stream.Splice(ws, backend)
		}}.ServeHTTP(w, r)
		log.Info("stream closed")
	}
}

// isWebsocket reports whether r asks to switch to a websocket.
func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && r.Header.Get("Sec-WebSocket-Key") != ""
}

// plainProtocol picks plain.kubevirt.io when the client offers it; a
// client offering none still gets the raw stream.
func plainProtocol(cfg *websocket.Config, _ *http.Request) error {
	for _, p := range cfg.Protocol {
		if p == PlainStreamProtocol {
			cfg.Protocol = []string{p}
			return nil
		}
	}
	cfg.Protocol = nil
	return nil
}

// streamTarget is the VMI a stream reaches: the one named, or that of the
// VM named, which must have one it owns, as KubeVirt answers.
func (a *API) streamTarget(ctx context.Context, resource, ns, name string) (*v1.VirtualMachineInstance, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	var owner *v1.VirtualMachine
	if resource == "virtualmachines" {
		owner = &v1.VirtualMachine{}
		if err := a.Client.Get(ctx, key, owner); err != nil {
			return nil, err
		}
		if !owner.Status.Created {
			return nil, apierrors.NewConflict(vmResource, name, errors.New("VMI is not started"))
		}
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := a.Client.Get(ctx, key, vmi); err != nil {
		return nil, err
	}
	if owner != nil && !metav1.IsControlledBy(vmi, owner) {
		return nil, apierrors.NewNotFound(vmiResource, name)
	}
	return vmi, nil
}

// stream opens op of the handler running vmi as a byte stream (the
// handler answers 101 Switching Protocols to protocol), or returns its
// refusal as the API's error.
func (h *Handlers) stream(ctx context.Context, vmi *v1.VirtualMachineInstance, op string, query url.Values, protocol string) (io.ReadWriteCloser, error) {
	hc, req, err := h.request(ctx, vmi, http.MethodGet, op, query)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(err.Error())
	}
	rwc, err := stream.Open(hc, req, protocol)
	var refused *stream.Refused
	switch {
	case err == nil:
		return rwc, nil
	case errors.As(err, &refused) && refused.Code == http.StatusConflict:
		return nil, vmiConflict(vmi.Name, refused.Msg)
	case errors.As(err, &refused) && refused.Code == http.StatusBadRequest:
		return nil, apierrors.NewBadRequest(refused.Msg)
	case errors.As(err, &refused):
		return nil, apierrors.NewInternalError(fmt.Errorf("the handler of node %s: %s", vmi.Status.NodeName, refused.Msg))
	default:
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("reaching the handler of node %s: %v", vmi.Status.NodeName, err))
	}
}
