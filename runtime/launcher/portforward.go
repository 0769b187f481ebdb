package launcher

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tekvirt/tekvirt/contracts/stream"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// PortForwardPath is where a launcher serves port-forward streams:
// PortForwardPath + "PROTOCOL/PORT", Upgrade stream.PortForward.
const PortForwardPath = "/portforward/"

// dialGuestTimeout bounds connecting to a guest port's forward.
const dialGuestTimeout = 10 * time.Second

// ParseGuestPort reads the port and protocol of a port-forward request as
// KubeVirt names them: a port 1-65535 and "tcp" (the default) or "udp".
func ParseGuestPort(port, protocol string) (GuestPort, error) {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return GuestPort{}, fmt.Errorf("port %q is not a port number (1-65535)", port)
	}
	p := GuestPort{Protocol: strings.ToLower(protocol), Port: int32(n)}
	if p.Protocol == "" {
		p.Protocol = "tcp"
	}
	if p.Protocol != "tcp" && p.Protocol != "udp" {
		return GuestPort{}, fmt.Errorf("protocol %q: want tcp or udp", protocol)
	}
	return p, nil
}

// guestAddress is the guest's address on the network between it and its
// Pod, where the launcher reaches every guest port; invalid when the guest
// has no interface on the pod network.
func guestAddress(opts domain.Options) netip.Addr {
	for _, iface := range opts.Interfaces {
		if !iface.Secondary {
			return iface.Address.Addr()
		}
	}
	return netip.Addr{}
}

// handlePortForward connects the caller to a port of the guest: 400 for a
// bad port or protocol, 502 when the forward cannot be made or reached.
func (s *server) handlePortForward(w http.ResponseWriter, r *http.Request) {
	if !stream.Wants(w, r, stream.PortForward) {
		return
	}
	p, err := ParseGuestPort(r.PathValue("port"), r.PathValue("protocol"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !s.guest.IsValid() {
		http.Error(w, fmt.Sprintf("forwarding guest port %d/%s: the guest has no interface on the pod network", p.Port, p.Protocol), http.StatusBadGateway)
		return
	}
	addr := net.JoinHostPort(s.guest.String(), strconv.Itoa(int(p.Port)))
	guest, err := net.DialTimeout(p.Protocol, addr, dialGuestTimeout)
	if err != nil {
		http.Error(w, fmt.Sprintf("connecting to guest port %d/%s: %v", p.Port, p.Protocol, err), http.StatusBadGateway)
		return
	}
	client, err := stream.Accept(w, stream.PortForward)
	if err != nil {
		guest.Close()
		return
	}
	s.log.Info("port-forward opened", "port", p.Port, "protocol", p.Protocol)
	stream.Splice(client, guest)
	s.log.Info("port-forward closed", "port", p.Port, "protocol", p.Protocol)
}
