package main

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// TestChecksum: the worked example of RFC 1071's successors (the header
// of Wikipedia's "IPv4 header checksum", checksum 0xb861).
func TestChecksum(t *testing.T) {
	h, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	if got := checksum(h); got != 0xb861 {
		t.Errorf("checksum %#04x, want 0xb861", got)
	}
}

// TestVXLANFrame: the layers sit where a receiving kernel reads them, and
// the inner header's checksum verifies (sums to 0xffff, complemented 0).
func TestVXLANFrame(t *testing.T) {
	query, err := dnsQuery("control.apart.test.")
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("0a:58:0a:84:00:01")
	frame := vxlanFrame(1, mac, ipv4UDP(netip.MustParseAddr("10.132.9.9"), netip.MustParseAddr("10.132.0.5"), 40053, 53, query))
	if !bytes.Equal(frame[:8], []byte{0x08, 0, 0, 0, 0, 0, 1, 0}) {
		t.Errorf("VXLAN header % x", frame[:8])
	}
	if !bytes.Equal(frame[8:14], mac) || frame[20] != 0x08 || frame[21] != 0x00 {
		t.Errorf("Ethernet header % x", frame[8:22])
	}
	ip := frame[22:]
	if checksum(ip[:20]) != 0 {
		t.Errorf("IPv4 header checksum does not verify: % x", ip[:20])
	}
	if got := int(ip[2])<<8 | int(ip[3]); got != len(ip) {
		t.Errorf("IPv4 total length %d, packet %d", got, len(ip))
	}
	var p dnsmessage.Parser
	if _, err := p.Start(ip[28:]); err != nil {
		t.Fatal(err)
	}
	q, err := p.Question()
	if err != nil || q.Name.String() != "control.apart.test." {
		t.Errorf("question %v, %v", q, err)
	}
}
