package registry

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
)

// PullOnly serves h's reads (GET, HEAD) to anyone and its writes (pushes,
// deletes) only to clients whose address is one of pushers: the registry's
// address on the cluster network is the host's for pushing, the Pods' and
// guests' for pulling. Anyone else's write is DENIED, as a registry
// answers a push without the right.
func PullOnly(h http.Handler, pushers ...netip.Addr) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		from, perr := netip.ParseAddr(host)
		if err == nil && perr == nil && slices.Contains(pushers, from.Unmap()) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"errors":[{"code":"DENIED","message":"this registry takes pushes only from the host that runs it, not from %s: pull from here, push from the host"}]}`, host)
	})
}
