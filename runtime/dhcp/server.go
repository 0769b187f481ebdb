package dhcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// Ports of DHCPv4.
const (
	ServerPort = 67
	ClientPort = 68
)

// Lease is what the server hands its one client.
type Lease struct {
	// Client is the guest interface's MAC: other clients get no answer.
	Client net.HardwareAddr
	// Address is the client's address and network.
	Address netip.Prefix
	// Gateway is the client's default route, and the server's address
	// unless Server is set.
	Gateway netip.Addr
	Server  netip.Addr
	// Routes, when set, are handed as classless static routes, with the
	// default route through Gateway added (a client that reads them
	// ignores the router option).
	Routes []podnetwork.Route
	// DNS servers and search domains, as the Pod's resolv.conf has them.
	DNS    []netip.Addr
	Search []string
	// MTU of the link (0: not sent) and the guest's host name ("": none).
	MTU      int
	Hostname string
}

// Reply is the server's answer to req, nil when it gives none (another
// client, a message a server does not answer).
func (l *Lease) Reply(req *Message) (*Message, error) {
	if req.Op != bootRequest || req.CHAddr.String() != l.Client.String() {
		return nil, nil
	}
	typ := l.replyType(req)
	if typ == 0 {
		return nil, nil
	}
	rep := &Message{
		Op: bootReply, XID: req.XID, Flags: req.Flags, GIAddr: req.GIAddr, CHAddr: req.CHAddr,
		Options: map[byte][]byte{optMessageType: {typ}, optServerID: l.server().AsSlice()},
	}
	if typ == Nak {
		return rep, nil
	}
	if req.Type() == Inform {
		rep.CIAddr = req.CIAddr
	} else {
		rep.YIAddr = l.Address.Addr()
		rep.Options[optLeaseTime] = binary.BigEndian.AppendUint32(nil, infiniteLease)
	}
	rep.SIAddr = l.server()
	return rep, l.configure(rep.Options)
}

// server is the address the server answers from.
func (l *Lease) server() netip.Addr {
	if l.Server.IsValid() {
		return l.Server
	}
	return l.Gateway
}

// replyType is the type of the answer to req: an offer to a discover, an
// acknowledgement (or a refusal, for another address) to a request or an
// inform, 0 for none.
func (l *Lease) replyType(req *Message) byte {
	switch req.Type() {
	case Discover:
		return Offer
	case Request:
		if id := req.Options[optServerID]; len(id) == 4 && addr4(id) != l.server() {
			return 0 // the client chose another server
		}
		requested := req.CIAddr
		if v := req.Options[optRequestedIP]; len(v) == 4 {
			requested = addr4(v)
		}
		if requested.IsValid() && !requested.IsUnspecified() && requested != l.Address.Addr() {
			return Nak
		}
		return Ack
	case Inform:
		return Ack
	}
	return 0
}

// configure sets the options that configure the client: mask, router,
// DNS servers (IPv4 ones) and search domains, MTU and host name.
func (l *Lease) configure(opts map[byte][]byte) error {
	opts[optSubnetMask] = []byte(net.CIDRMask(l.Address.Bits(), 32))
	if l.Gateway.IsValid() {
		opts[optRouter] = l.Gateway.AsSlice()
	}
	if len(l.Routes) > 0 {
		routes, err := classlessRoutes(l.Routes, l.Gateway)
		if err != nil {
			return err
		}
		opts[optStaticRoutes] = routes
	}
	var dns []byte
	for _, a := range l.DNS {
		if a.Is4() {
			dns = append(dns, a.AsSlice()...)
		}
	}
	if len(dns) > 0 {
		opts[optDNS] = dns
	}
	if len(l.Search) > 0 {
		enc, err := encodeDomains(l.Search)
		if err != nil {
			return err
		}
		opts[optDomainSearch] = enc
		opts[optDomainName] = []byte(l.Search[0])
	}
	if l.MTU > 0 {
		opts[optMTU] = binary.BigEndian.AppendUint16(nil, uint16(l.MTU))
	}
	if l.Hostname != "" {
		opts[optHostName] = []byte(l.Hostname)
	}
	return nil
}

// classlessRoutes encodes routes, and the default one through gateway
// (when valid) unless they have one, as RFC 3442's option: the prefix length, the
// destination's significant octets, the router (0.0.0.0: on the link).
func classlessRoutes(routes []podnetwork.Route, gateway netip.Addr) ([]byte, error) {
	def := podnetwork.Route{Dest: netip.PrefixFrom(netip.IPv4Unspecified(), 0), Via: gateway}
	if gateway.IsValid() && !slices.ContainsFunc(routes, func(r podnetwork.Route) bool { return r.Dest.Bits() == 0 }) {
		routes = append(slices.Clip(routes), def)
	}
	var out []byte
	for _, r := range routes {
		via := r.Via
		if !via.IsValid() {
			via = netip.IPv4Unspecified()
		}
		if !r.Dest.Addr().Is4() || !via.Is4() {
			return nil, fmt.Errorf("route to %s via %s: not IPv4", r.Dest, r.Via)
		}
		dest := r.Dest.Masked().Addr().As4()
		out = append(out, byte(r.Dest.Bits()))
		out = append(out, dest[:(r.Dest.Bits()+7)/8]...)
		out = append(out, via.AsSlice()...)
	}
	return out, nil
}

// Serve answers the client on the interface ifname until ctx ends,
// calling listening (if not nil) once its socket is bound. The
// socket is bound to that interface, so the Pod's own network never sees
// the server; binding port 67 needs the network namespace's
// ip_unprivileged_port_start at or below it (the launcher Pod sets it), or
// CAP_NET_BIND_SERVICE.
func (l *Lease) Serve(ctx context.Context, ifname string, log *slog.Logger, listening func()) error {
	pc, err := listenOn(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", ServerPort), ifname, true)
	if err != nil {
		return fmt.Errorf("DHCP server on %s: %w", ifname, err)
	}
	if listening != nil {
		listening()
	}
	err = answer(ctx, pc, func(b []byte, _ net.Addr) ([]byte, net.Addr, error) {
		req, err := Parse(b)
		if err != nil {
			return nil, nil, err
		}
		rep, err := l.Reply(req)
		if err != nil || rep == nil {
			return nil, nil, err
		}
		to := &net.UDPAddr{IP: net.IPv4bcast, Port: ClientPort}
		if req.CIAddr.IsValid() && !req.CIAddr.IsUnspecified() {
			to.IP = net.IP(req.CIAddr.AsSlice())
		}
		log.Info("DHCP reply", "type", rep.Type(), "client", req.CHAddr.String(), "address", l.Address.Addr().String())
		return rep.Marshal(), to, nil
	}, log.With("server", "DHCP on "+ifname))
	if err != nil {
		return fmt.Errorf("DHCP server on %s: %w", ifname, err)
	}
	return nil
}

// listenOn is a UDP socket on addr bound to the interface ifname (and
// allowed to broadcast), closed when ctx ends.
func listenOn(ctx context.Context, network, addr, ifname string, broadcast bool) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); serr != nil {
				return
			}
			if broadcast {
				if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1); serr != nil {
					return
				}
			}
			serr = syscall.BindToDevice(int(fd), ifname)
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		_ = pc.Close()
	}()
	return pc, nil
}

// answer reads requests from pc until ctx ends and sends what reply makes
// of each (nothing when it returns no message): a request it cannot read
// is logged and dropped.
func answer(ctx context.Context, pc net.PacketConn, reply func(req []byte, from net.Addr) ([]byte, net.Addr, error), log *slog.Logger) error {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		rep, to, err := reply(buf[:n], from)
		if err != nil {
			log.Info("request not answered", "from", from.String(), "err", err)
			continue
		}
		if rep == nil {
			continue
		}
		if _, err := pc.WriteTo(rep, to); err != nil {
			log.Error("sending the reply", "to", to.String(), "err", err)
		}
	}
}
