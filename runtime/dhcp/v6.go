package dhcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"golang.org/x/net/ipv6"
)

// Ports of DHCPv6 (RFC 8415).
const (
	ServerPort6 = 547
	ClientPort6 = 546
)

// AllServers6 is the multicast group DHCPv6 clients send to
// (All_DHCP_Relay_Agents_and_Servers).
var AllServers6 = netip.MustParseAddr("ff02::1:2")

// DHCPv6 message types this server reads or writes.
const (
	Solicit6            byte = 1
	Advertise6          byte = 2
	Request6            byte = 3
	Confirm6            byte = 4
	Renew6              byte = 5
	Rebind6             byte = 6
	Reply6              byte = 7
	Release6            byte = 8
	Decline6            byte = 9
	InformationRequest6 byte = 11
)

// DHCPv6 options this server reads or writes.
const (
	Opt6ClientID    uint16 = 1
	Opt6ServerID    uint16 = 2
	Opt6IANA        uint16 = 3
	Opt6IAAddr      uint16 = 5
	Opt6RapidCommit uint16 = 14
	Opt6DNS         uint16 = 23
	Opt6DomainList  uint16 = 24
	duidLL                 = 3 // DUID based on the link-layer address
	hwEthernet             = 1
	infinity6              = 0xffffffff
)

// Option6 is one DHCPv6 option.
type Option6 struct {
	Code uint16
	Data []byte
}

// Message6 is a DHCPv6 client or server message (not a relay's).
type Message6 struct {
	Type    byte
	XID     [3]byte
	Options []Option6
}

// ParseMessage6 decodes a client or server message.
func ParseMessage6(b []byte) (*Message6, error) {
	if len(b) < 4 {
		return nil, errors.New("DHCPv6 message shorter than its header")
	}
	m := &Message6{Type: b[0]}
	copy(m.XID[:], b[1:4])
	opts, err := parseOptions6(b[4:])
	m.Options = opts
	return m, err
}

func parseOptions6(b []byte) ([]Option6, error) {
	var out []Option6
	for len(b) > 0 {
		if len(b) < 4 {
			return out, errors.New("truncated DHCPv6 option header")
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b) < 4+n {
			return out, fmt.Errorf("DHCPv6 option %d: %d bytes, %d left", code, n, len(b)-4)
		}
		out = append(out, Option6{Code: code, Data: b[4 : 4+n]})
		b = b[4+n:]
	}
	return out, nil
}

// Marshal encodes m.
func (m *Message6) Marshal() []byte {
	out := append([]byte{m.Type}, m.XID[:]...)
	return appendOptions6(out, m.Options)
}

func appendOptions6(out []byte, opts []Option6) []byte {
	for _, o := range opts {
		out = binary.BigEndian.AppendUint16(out, o.Code)
		out = binary.BigEndian.AppendUint16(out, uint16(len(o.Data)))
		out = append(out, o.Data...)
	}
	return out
}

// Option returns the data of m's first option code, or nil.
func (m *Message6) Option(code uint16) []byte {
	for _, o := range m.Options {
		if o.Code == code {
			return o.Data
		}
	}
	return nil
}

// Lease6 is what the DHCPv6 server hands its one client, as KubeVirt's
// launcher does for masquerade: the guest's address, for ever, and the
// Pod's IPv6 DNS servers. Routes are not DHCPv6's: the guest's default
// route is its own to set (cloud-init's gateway6).
type Lease6 struct {
	Address netip.Addr
	// ServerMAC makes the server's DUID: the bridge's address.
	ServerMAC net.HardwareAddr
	DNS       []netip.Addr
	Search    []string
}

func (l *Lease6) duid() []byte {
	d := binary.BigEndian.AppendUint16(nil, duidLL)
	d = binary.BigEndian.AppendUint16(d, hwEthernet)
	return append(d, l.ServerMAC...)
}

// Reply is the server's answer to req, nil when it gives none (a message
// for another server, one without a client, one servers do not answer).
func (l *Lease6) Reply(req *Message6) (*Message6, error) {
	client := req.Option(Opt6ClientID)
	if client == nil && req.Type != InformationRequest6 {
		return nil, nil
	}
	if server := req.Option(Opt6ServerID); server != nil && !bytes.Equal(server, l.duid()) {
		return nil, nil
	}
	typ, withAddress := replyType6(req)
	if typ == 0 {
		return nil, nil
	}
	rep := &Message6{Type: typ, XID: req.XID}
	if client != nil {
		rep.Options = append(rep.Options, Option6{Opt6ClientID, client})
	}
	rep.Options = append(rep.Options, Option6{Opt6ServerID, l.duid()})
	if typ == Reply6 && req.Type == Solicit6 {
		rep.Options = append(rep.Options, Option6{Code: Opt6RapidCommit})
	}
	if withAddress {
		for _, o := range req.Options {
			if o.Code == Opt6IANA && len(o.Data) >= 4 {
				rep.Options = append(rep.Options, Option6{Opt6IANA, l.iana(o.Data[:4])})
			}
		}
	}
	return rep, l.configure6(rep)
}

// replyType6 is the type of the answer to req (0: none) and whether it
// carries the address: an advertisement to a solicit (a reply when it
// asks for rapid commit), a reply to the rest.
func replyType6(req *Message6) (typ byte, withAddress bool) {
	switch req.Type {
	case Solicit6:
		if req.Option(Opt6RapidCommit) == nil {
			return Advertise6, true
		}
		return Reply6, true
	case Request6, Renew6, Rebind6, Confirm6:
		return Reply6, true
	case InformationRequest6, Release6, Decline6:
		return Reply6, false
	}
	return 0, false
}

// configure6 adds the IPv6 DNS servers and the search domains to rep.
func (l *Lease6) configure6(rep *Message6) error {
	var dns []byte
	for _, a := range l.DNS {
		if a.Is6() && !a.Is4In6() {
			dns = append(dns, a.AsSlice()...)
		}
	}
	if len(dns) > 0 {
		rep.Options = append(rep.Options, Option6{Opt6DNS, dns})
	}
	if len(l.Search) > 0 {
		enc, err := encodeDomains(l.Search)
		if err != nil {
			return err
		}
		rep.Options = append(rep.Options, Option6{Opt6DomainList, enc})
	}
	return nil
}

// iana is the IA_NA of the client's IAID: the address with infinite
// lifetimes, and T1 and T2 infinite too (no renewals).
func (l *Lease6) iana(iaid []byte) []byte {
	addr := append(l.Address.AsSlice(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	out := append([]byte{}, iaid...)
	out = binary.BigEndian.AppendUint32(out, infinity6)
	out = binary.BigEndian.AppendUint32(out, infinity6)
	return appendOptions6(out, []Option6{{Opt6IAAddr, addr}})
}

// Serve6 answers the client on the interface ifname until ctx ends,
// calling listening (if not nil) once its socket is bound and in the
// servers' multicast group. As Serve, the socket is bound to that
// interface; port 547 needs ip_unprivileged_port_start at or below it.
func (l *Lease6) Serve6(ctx context.Context, ifname string, log *slog.Logger, listening func()) error {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return fmt.Errorf("DHCPv6 server: %w", err)
	}
	pc, err := listenOn(ctx, "udp6", fmt.Sprintf("[::]:%d", ServerPort6), ifname, false)
	if err != nil {
		return fmt.Errorf("DHCPv6 server on %s: %w", ifname, err)
	}
	if err := ipv6.NewPacketConn(pc).JoinGroup(iface, &net.UDPAddr{IP: AllServers6.AsSlice()}); err != nil {
		_ = pc.Close()
		return fmt.Errorf("DHCPv6 server on %s: joining %s: %w", ifname, AllServers6, err)
	}
	if listening != nil {
		listening()
	}
	err = answer(ctx, pc, func(b []byte, from net.Addr) ([]byte, net.Addr, error) {
		req, err := ParseMessage6(b)
		if err != nil {
			return nil, nil, err
		}
		rep, err := l.Reply(req)
		if err != nil || rep == nil {
			return nil, nil, err
		}
		log.Info("DHCPv6 reply", "type", rep.Type, "address", l.Address.String())
		return rep.Marshal(), from, nil
	}, log.With("server", "DHCPv6 on "+ifname))
	if err != nil {
		return fmt.Errorf("DHCPv6 server on %s: %w", ifname, err)
	}
	return nil
}
