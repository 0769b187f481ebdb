package dhcp

import (
	"bytes"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

var guestMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0xaa, 0xbb, 0xcc}

func lease() *Lease {
	return &Lease{
		Client:   guestMAC,
		Address:  netip.MustParsePrefix("10.0.2.2/24"),
		Gateway:  netip.MustParseAddr("10.0.2.1"),
		DNS:      []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::10")},
		Search:   []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		MTU:      1450,
		Hostname: "vm1",
	}
}

func request(typ byte, mac net.HardwareAddr, opts map[byte][]byte) *Message {
	m := &Message{Op: bootRequest, XID: 0x1234, Flags: broadcastFlag, CHAddr: mac, Options: map[byte][]byte{optMessageType: {typ}}}
	for k, v := range opts {
		m.Options[k] = v
	}
	return m
}

func TestReply(t *testing.T) {
	other := net.HardwareAddr{0x52, 0x54, 0x00, 0, 0, 1}
	for _, tc := range []struct {
		name string
		req  *Message
		want byte // 0: no reply
	}{
		{"discover", request(Discover, guestMAC, nil), Offer},
		{"request of the offer", request(Request, guestMAC, map[byte][]byte{optRequestedIP: {10, 0, 2, 2}, optServerID: {10, 0, 2, 1}}), Ack},
		{"renewal", &Message{Op: bootRequest, CIAddr: netip.MustParseAddr("10.0.2.2"), CHAddr: guestMAC, Options: map[byte][]byte{optMessageType: {Request}}}, Ack},
		{"request of another address", request(Request, guestMAC, map[byte][]byte{optRequestedIP: {10, 0, 2, 9}}), Nak},
		{"request to another server", request(Request, guestMAC, map[byte][]byte{optRequestedIP: {10, 0, 2, 2}, optServerID: {10, 0, 2, 254}}), 0},
		{"inform", request(Inform, guestMAC, nil), Ack},
		{"another client", request(Discover, other, nil), 0},
		{"release", request(Release, guestMAC, nil), 0},
		{"a reply", &Message{Op: bootReply, CHAddr: guestMAC, Options: map[byte][]byte{optMessageType: {Offer}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := lease().Reply(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == 0 {
				if rep != nil {
					t.Fatalf("replied %d, want no reply", rep.Type())
				}
				return
			}
			if rep == nil || rep.Type() != tc.want || rep.XID != tc.req.XID {
				t.Fatalf("reply %+v, want type %d", rep, tc.want)
			}
		})
	}
}

func TestOfferCarriesTheBinding(t *testing.T) {
	rep, err := lease().Reply(request(Discover, guestMAC, nil))
	if err != nil {
		t.Fatal(err)
	}
	// Through the wire format, as the guest reads it.
	got, err := Parse(rep.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if got.YIAddr != netip.MustParseAddr("10.0.2.2") || got.Flags != broadcastFlag || got.CHAddr.String() != guestMAC.String() {
		t.Errorf("header %+v", got)
	}
	for code, want := range map[byte][]byte{
		optSubnetMask:   {255, 255, 255, 0},
		optRouter:       {10, 0, 2, 1},
		optServerID:     {10, 0, 2, 1},
		optDNS:          {10, 96, 0, 10}, // IPv4 servers only
		optLeaseTime:    {0xff, 0xff, 0xff, 0xff},
		optMTU:          {0x05, 0xaa},
		optHostName:     []byte("vm1"),
		optDomainName:   []byte("ns.svc.cluster.local"),
		optDomainSearch: append(append([]byte("\x02ns\x03svc\x07cluster\x05local\x00"), "\x03svc\x07cluster\x05local\x00"...), "\x07cluster\x05local\x00"...),
	} {
		if !bytes.Equal(got.Options[code], want) {
			t.Errorf("option %d = %v, want %v", code, got.Options[code], want)
		}
	}
}

// The bridge binding's lease: the Pod's address, its gateway and routes,
// from the link-local server address, which the guest reaches on the link.
func TestBridgeLeaseRoutes(t *testing.T) {
	l := lease()
	l.Address = netip.MustParsePrefix("10.244.1.7/24")
	l.Gateway = netip.MustParseAddr("10.244.1.1")
	l.Server = netip.MustParseAddr("169.254.75.10")
	l.Routes = []podnetwork.Route{
		{Dest: netip.MustParsePrefix("169.254.75.10/32")},
		{Dest: netip.MustParsePrefix("10.96.0.0/12"), Via: netip.MustParseAddr("10.244.1.1")},
	}
	rep, err := l.Reply(request(Discover, guestMAC, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[byte][]byte{
		optServerID: {169, 254, 75, 10},
		optRouter:   {10, 244, 1, 1},
		optStaticRoutes: {
			32, 169, 254, 75, 10, 0, 0, 0, 0,
			12, 10, 96, 10, 244, 1, 1,
			0, 10, 244, 1, 1,
		},
	}
	for code, w := range want {
		if !bytes.Equal(rep.Options[code], w) {
			t.Errorf("option %d = %v, want %v", code, rep.Options[code], w)
		}
	}
	if rep.SIAddr != l.Server {
		t.Errorf("siaddr %s", rep.SIAddr)
	}
	// The guest asks again of the server it chose.
	ack, _ := l.Reply(request(Request, guestMAC, map[byte][]byte{optServerID: {169, 254, 75, 10}, optRequestedIP: {10, 244, 1, 7}}))
	if ack == nil || ack.Type() != Ack {
		t.Fatalf("request to the link-local server: %+v", ack)
	}
	l.Routes = []podnetwork.Route{{Dest: netip.MustParsePrefix("fd00::/64")}}
	if _, err := l.Reply(request(Discover, guestMAC, nil)); err == nil {
		t.Error("an IPv6 route was encoded")
	}
}

func TestNakCarriesNoAddress(t *testing.T) {
	rep, _ := lease().Reply(request(Request, guestMAC, map[byte][]byte{optRequestedIP: {10, 0, 2, 9}}))
	if rep.YIAddr.IsValid() || rep.Options[optRouter] != nil || rep.Options[optLeaseTime] != nil {
		t.Fatalf("NAK %+v", rep)
	}
}

func TestLongOptionsSplitAndJoin(t *testing.T) {
	long := bytes.Repeat([]byte{'a'}, 600)
	m := &Message{Op: bootReply, CHAddr: guestMAC, Options: map[byte][]byte{optMessageType: {Ack}, optDomainSearch: long}}
	got, err := Parse(m.Marshal())
	if err != nil || !bytes.Equal(got.Options[optDomainSearch], long) {
		t.Fatalf("%v: option of %d bytes back", err, len(got.Options[optDomainSearch]))
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	good := request(Discover, guestMAC, nil).Marshal()
	for name, b := range map[string][]byte{
		"short":               good[:100],
		"no cookie":           append(append(slices.Clone(good[:headerLen]), 1, 2, 3, 4), good[headerLen+4:]...),
		"not ethernet":        func() []byte { b := slices.Clone(good); b[1] = 6; return b }(),
		"option past the end": append(slices.Clone(good[:headerLen+4]), optHostName, 10, 'a'),
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestResolvConf(t *testing.T) {
	servers, search := ResolvConf([]byte("# kubelet\nsearch ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10 # cluster DNS\nnameserver 10.96.0.10\noptions ndots:5\n"))
	if len(servers) != 1 || servers[0].String() != "10.96.0.10" || !slices.Equal(search, []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local"}) {
		t.Fatalf("servers %v search %v", servers, search)
	}
	if _, search := ResolvConf([]byte("domain example.org\nnameserver 192.0.2.1\n")); !slices.Equal(search, []string{"example.org"}) {
		t.Fatalf("domain line: search %v", search)
	}
}
