package dhcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Message types (option 53).
const (
	Discover byte = 1
	Offer    byte = 2
	Request  byte = 3
	Decline  byte = 4
	Ack      byte = 5
	Nak      byte = 6
	Release  byte = 7
	Inform   byte = 8
)

// Options this server reads or writes.
const (
	optSubnetMask    = 1
	optRouter        = 3
	optDNS           = 6
	optHostName      = 12
	optDomainName    = 15
	optMTU           = 26
	optRequestedIP   = 50
	optLeaseTime     = 51
	optMessageType   = 53
	optServerID      = 54
	optDomainSearch  = 119
	optStaticRoutes  = 121 // classless, RFC 3442
	optPad           = 0
	optEnd           = 255
	bootRequest      = 1
	bootReply        = 2
	headerLen        = 236
	broadcastFlag    = 0x8000
	infiniteLease    = 0xffffffff
	minMessageLength = 300 // BOOTP's, which some clients still expect
)

var magicCookie = []byte{99, 130, 83, 99}

// Message is a DHCPv4 message: the fixed fields this server uses and the
// options by code.
type Message struct {
	Op      byte
	XID     uint32
	Flags   uint16
	CIAddr  netip.Addr
	YIAddr  netip.Addr
	SIAddr  netip.Addr
	GIAddr  netip.Addr
	CHAddr  net.HardwareAddr
	Options map[byte][]byte
}

// Type is the message's type (option 53), 0 if it has none.
func (m *Message) Type() byte {
	if v := m.Options[optMessageType]; len(v) == 1 {
		return v[0]
	}
	return 0
}

// Parse reads a DHCPv4 message from an Ethernet client.
func Parse(b []byte) (*Message, error) {
	if len(b) < headerLen+len(magicCookie) {
		return nil, fmt.Errorf("a DHCP message is at least %d bytes, got %d", headerLen+len(magicCookie), len(b))
	}
	if b[1] != 1 || b[2] != 6 {
		return nil, fmt.Errorf("hardware type %d length %d: only Ethernet is served", b[1], b[2])
	}
	if !bytes.Equal(b[headerLen:headerLen+4], magicCookie) {
		return nil, errors.New("no DHCP magic cookie")
	}
	m := &Message{
		Op:      b[0],
		XID:     binary.BigEndian.Uint32(b[4:8]),
		Flags:   binary.BigEndian.Uint16(b[10:12]),
		CIAddr:  addr4(b[12:16]),
		YIAddr:  addr4(b[16:20]),
		SIAddr:  addr4(b[20:24]),
		GIAddr:  addr4(b[24:28]),
		CHAddr:  net.HardwareAddr(bytes.Clone(b[28:34])),
		Options: map[byte][]byte{},
	}
	opts := b[headerLen+4:]
	for len(opts) > 0 {
		code := opts[0]
		if code == optEnd {
			break
		}
		if code == optPad {
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || len(opts) < 2+int(opts[1]) {
			return nil, fmt.Errorf("option %d runs past the message", code)
		}
		n := int(opts[1])
		// Repeated options concatenate (RFC 3396).
		m.Options[code] = append(m.Options[code], opts[2:2+n]...)
		opts = opts[2+n:]
	}
	return m, nil
}

func addr4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }

// Marshal writes the message, its options in code order, options longer
// than 255 bytes split as RFC 3396 says.
func (m *Message) Marshal() []byte {
	b := make([]byte, headerLen, minMessageLength)
	b[0], b[1], b[2] = m.Op, 1, 6
	binary.BigEndian.PutUint32(b[4:8], m.XID)
	binary.BigEndian.PutUint16(b[10:12], m.Flags)
	for i, a := range []netip.Addr{m.CIAddr, m.YIAddr, m.SIAddr, m.GIAddr} {
		if a.IsValid() {
			copy(b[12+4*i:16+4*i], a.AsSlice())
		}
	}
	copy(b[28:44], m.CHAddr)
	b = append(b, magicCookie...)
	// The message type first, as some clients expect.
	codes := []byte{optMessageType}
	for c := 1; c < optEnd; c++ {
		if _, ok := m.Options[byte(c)]; ok && c != optMessageType {
			codes = append(codes, byte(c))
		}
	}
	for _, c := range codes {
		v, ok := m.Options[c]
		if !ok {
			continue
		}
		for first := true; first || len(v) > 0; first = false {
			n := min(len(v), 255)
			b = append(b, c, byte(n))
			b = append(b, v[:n]...)
			v = v[n:]
		}
	}
	b = append(b, optEnd)
	for len(b) < minMessageLength {
		b = append(b, optPad)
	}
	return b
}

// encodeDomains writes a domain search list (RFC 3397) as DNS names,
// without compression.
func encodeDomains(domains []string) ([]byte, error) {
	var out []byte
	for _, d := range domains {
		d = strings.TrimSuffix(d, ".")
		if d == "" {
			continue
		}
		for _, label := range strings.Split(d, ".") {
			if label == "" || len(label) > 63 {
				return nil, fmt.Errorf("search domain %q: a label is empty or longer than 63 bytes", d)
			}
			out = append(out, byte(len(label)))
			out = append(out, label...)
		}
		out = append(out, 0)
	}
	return out, nil
}
