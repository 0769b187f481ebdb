package launcher

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tekvirt/tekvirt/contracts/stream"
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

// forwards are the guest's ports reachable from the launcher's network
// namespace: those exposed on the Pod's addresses, and those forwarded from
// loopback only on a port-forward's first use (QEMU's user network needs a
// rule per port, and nothing but the launcher's own processes shares the
// Pod's loopback).
type forwards struct {
	vm *VM

	mu sync.Mutex
	// public ports listen on every address of the Pod, loopback included.
	public map[GuestPort]bool
	// local maps a guest port to the loopback port forwarding to it.
	local map[GuestPort]int
}

func newForwards(vm *VM) *forwards {
	return &forwards{vm: vm, public: map[GuestPort]bool{}, local: map[GuestPort]int{}}
}

// expose makes the Pod's addresses lead to the guest, as KubeVirt's
// masquerade binding does, for ports (QEMU's user network forwards one port
// per rule), and returns the addresses.
func (f *forwards) expose(ports []GuestPort, log *slog.Logger) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range ports {
		if err := f.vm.Forward(p.Protocol, net.JoinHostPort("", strconv.Itoa(int(p.Port))), int(p.Port)); err != nil {
			log.Error("no forward from the Pod's address", "protocol", p.Protocol, "port", p.Port, "err", err)
			continue
		}
		f.public[p] = true
	}
	ips := podIPs()
	log.Info("guest ports forwarded from the Pod", "ports", ports, "podIPs", ips)
	return ips
}

// address is where, in the Pod's network namespace, p of the guest is
// reached; a loopback forward is made for it on first use.
func (f *forwards) address(p GuestPort) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.public[p] {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p.Port))), nil
	}
	if port, ok := f.local[p]; ok {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
	}
	// QEMU takes a host port, not "any": borrow a free one from the kernel.
	// Only this launcher binds ports in the Pod, under f.mu.
	port, err := freeLoopbackPort(p.Protocol)
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := f.vm.Forward(p.Protocol, addr, int(p.Port)); err != nil {
		return "", err
	}
	f.local[p] = port
	return addr, nil
}

func freeLoopbackPort(protocol string) (int, error) {
	if protocol == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free loopback port: %w", err)
		}
		port := c.LocalAddr().(*net.UDPAddr).Port
		return port, c.Close()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// handlePortForward connects the caller to a port of the guest: 400 for a
// bad port or protocol, 502 when the forward cannot be made or reached.
// QEMU's user network accepts the connection before the guest does; a
// guest port nobody listens on shows as a stream that ends at once.
func (s *server) handlePortForward(w http.ResponseWriter, r *http.Request) {
	if !stream.Wants(w, r, stream.PortForward) {
		return
	}
	p, err := ParseGuestPort(r.PathValue("port"), r.PathValue("protocol"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	addr, err := s.forwards.address(p)
	if err != nil {
		http.Error(w, fmt.Sprintf("forwarding guest port %d/%s: %v", p.Port, p.Protocol, err), http.StatusBadGateway)
		return
	}
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
