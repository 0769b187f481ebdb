package dhcp

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func lease6() *Lease6 {
	return &Lease6{
		Address:   netip.MustParseAddr("fd10:0:2::2"),
		ServerMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01},
		DNS:       []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:10:96::a")},
		Search:    []string{"ns.svc.cluster.local"},
	}
}

// unhex is hex with spaces and newlines between the fields, for messages
// written by hand from RFC 8415's layout.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A client's Solicit with Rapid Commit, as dhclient -6 or NetworkManager
// send it: client ID (DUID-LL), an IA_NA, rapid commit, options wanted.
const solicitRapid = `01 abcdef
	0001 000a 0003 0001 525400123456
	0003 000c 01020304 00000000 00000000
	000e 0000
	0006 0004 0017 0018`

// The reply it wants: client and server IDs, rapid commit, the IA_NA with
// the address for ever, the IPv6 DNS server (not the IPv4 one), the
// search domain.
const replyRapid = `07 abcdef
	0001 000a 0003 0001 525400123456
	0002 000a 0003 0001 020000000001
	000e 0000
	0003 0028 01020304 ffffffff ffffffff
	  0005 0018 fd100000000200000000000000000002 ffffffff ffffffff
	0017 0010 fd00001000960000000000000000000a
	0018 0016 026e73 03737663 07636c7573746572 056c6f63616c 00`

func TestReply6(t *testing.T) {
	req, err := ParseMessage6(unhex(t, solicitRapid))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := lease6().Reply(req)
	if err != nil || rep == nil {
		t.Fatalf("reply %v, %v", rep, err)
	}
	if want := unhex(t, replyRapid); !bytes.Equal(rep.Marshal(), want) {
		t.Errorf("reply\n%x\nwant\n%x", rep.Marshal(), want)
	}
}

func TestReply6Types(t *testing.T) {
	l := lease6()
	client := unhex(t, "0001 000a 0003 0001 525400123456")
	iana := unhex(t, "0003 000c 01020304 00000000 00000000")
	ours := unhex(t, "0002 000a 0003 0001 020000000001")
	theirs := unhex(t, "0002 000a 0003 0001 020000000099")
	for _, tc := range []struct {
		name    string
		msg     []byte
		typ     byte // 0: no answer
		address bool
	}{
		{"solicit without rapid commit: advertise", concatBytes([]byte{Solicit6, 1, 2, 3}, client, iana), Advertise6, true},
		{"request to this server", concatBytes([]byte{Request6, 1, 2, 3}, client, ours, iana), Reply6, true},
		{"request to another server", concatBytes([]byte{Request6, 1, 2, 3}, client, theirs, iana), 0, false},
		{"renew", concatBytes([]byte{Renew6, 1, 2, 3}, client, ours, iana), Reply6, true},
		{"rebind", concatBytes([]byte{Rebind6, 1, 2, 3}, client, iana), Reply6, true},
		{"confirm", concatBytes([]byte{Confirm6, 1, 2, 3}, client, iana), Reply6, true},
		{"information request, no client ID", []byte{InformationRequest6, 1, 2, 3}, Reply6, false},
		{"release", concatBytes([]byte{Release6, 1, 2, 3}, client, ours, iana), Reply6, false},
		{"solicit without a client ID", concatBytes([]byte{Solicit6, 1, 2, 3}, iana), 0, false},
		{"a relay's message", concatBytes([]byte{12, 1, 2, 3}, client), 0, false},
	} {
		req, err := ParseMessage6(tc.msg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rep, err := l.Reply(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		switch {
		case tc.typ == 0 && rep != nil:
			t.Errorf("%s: answered %+v", tc.name, rep)
		case tc.typ != 0 && rep == nil:
			t.Errorf("%s: no answer", tc.name)
		case rep != nil && (rep.Type != tc.typ || rep.XID != [3]byte{1, 2, 3} || (rep.Option(Opt6IANA) != nil) != tc.address):
			t.Errorf("%s: type %d XID %x IA_NA %x; want type %d, address %v", tc.name, rep.Type, rep.XID, rep.Option(Opt6IANA), tc.typ, tc.address)
		}
	}
}

func concatBytes(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestParseMessage6RefusesMalformed(t *testing.T) {
	for _, b := range [][]byte{{1, 2}, {1, 2, 3, 4, 0, 1}, {1, 2, 3, 4, 0, 1, 0, 9, 1}} {
		if _, err := ParseMessage6(b); err == nil {
			t.Errorf("%x: parsed", b)
		}
	}
}

// The server on a bridge-like link in a network namespace of its own,
// asked as a guest asks: a Solicit with rapid commit from port 546 to the
// servers' multicast group, answered to the client's link-local address.
func TestServe6(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	runtime.LockOSThread() // the thread stays in the namespace: never unlocked
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	for _, s := range []string{"net/ipv6/conf/default/accept_dad", "net/ipv6/conf/all/accept_dad"} {
		if err := os.WriteFile("/proc/sys/"+s, []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "srv0"}, PeerName: "guest0"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"srv0", "guest0"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan error, 2)
	go func() {
		// Its socket is made on this goroutine's thread: in the namespace.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		ready <- lease6().Serve6(ctx, "srv0", slog.New(slog.DiscardHandler), func() { ready <- nil })
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	guest, err := net.InterfaceByName("guest0")
	if err != nil {
		t.Fatal(err)
	}
	var local net.IP
	deadline := time.Now().Add(5 * time.Second)
	for local == nil && time.Now().Before(deadline) {
		addrs, _ := guest.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsLinkLocalUnicast() {
				local = ipn.IP
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if local == nil {
		t.Fatal("guest0 has no link-local address")
	}
	conn, err := net.ListenUDP("udp6", &net.UDPAddr{IP: local, Port: ClientPort6, Zone: "guest0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.WriteTo(unhex(t, solicitRapid), &net.UDPAddr{IP: AllServers6.AsSlice(), Port: ServerPort6, Zone: "guest0"}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, from, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if want := unhex(t, replyRapid); !bytes.Equal(buf[:n], want) {
		t.Errorf("answer from %s\n%x\nwant\n%x", from, buf[:n], want)
	}
	if u := from.(*net.UDPAddr); u.Port != ServerPort6 || !u.IP.IsLinkLocalUnicast() {
		t.Errorf("answer from %s, want the server's link-local address, port %d", from, ServerPort6)
	}
}
