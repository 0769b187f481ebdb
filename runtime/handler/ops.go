package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// routeOps serves the VMI operations of the launchers on this node under
// KubeVirt's subresource paths: reads (guestosinfo, userlist,
// filesystemlist) with GET, changes (pause, unpause, softreboot, freeze,
// unfreeze) with PUT, each authorized as get or update of that
// subresource, as exec is as create.
func (s ExecServer) routeOps(mux *http.ServeMux) {
	base := "/apis/" + ExecGroup + "/v1/namespaces/{namespace}/" + ExecResource + "/{name}/"
	for _, op := range append(slices.Clone(launcher.Reads), launcher.Changes...) {
		method, verb := http.MethodPut, "update"
		if slices.Contains(launcher.Reads, op) {
			method, verb = http.MethodGet, "get"
		}
		mux.HandleFunc(method+" "+base+op, s.serveOp(op, verb))
	}
	mux.HandleFunc("GET "+base+"console", s.serveConsole)
	mux.HandleFunc("GET "+base+"vnc", s.serveVNC)
	mux.HandleFunc("GET "+base+"portforward/{port}", s.servePortForward)
	mux.HandleFunc("GET "+base+"portforward/{port}/{protocol}", s.servePortForward)
}

func (s ExecServer) serveOp(op, verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if code, err := s.authorize(ctx, r, verb, op, ns, name); err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		d, ok := s.runningHere(ctx, w, ns, name)
		if !ok {
			return
		}
		var out json.RawMessage
		if err := d.client().Op(ctx, op, r.URL.Query(), &out); err != nil {
			code := http.StatusBadGateway
			var oe *launcher.OpError
			if errors.As(err, &oe) && oe.Code == http.StatusConflict {
				code = http.StatusConflict
			}
			http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: %v", ns, name, err), code)
			return
		}
		if len(out) == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}
}
