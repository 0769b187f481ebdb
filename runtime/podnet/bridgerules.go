package podnet

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// Ether types the bridge binding lets the guest send.
const (
	etherIPv4 = 0x0800
	etherARP  = 0x0806
)

// table is the name of b's nftables table (family bridge).
func (b Bridge) table() string {
	if b.name() == podnetwork.BridgeName {
		return TableName
	}
	return TableName + "-" + b.name()
}

// rules replaces the binding's nftables table (family bridge) in ns:
//
//	prerouting (raw): from the tap, drop (and count) frames not from the
//	                  guest's MAC; when the guest has the Pod's address,
//	                  IPv4 packets and ARP not from it (DHCP's 0.0.0.0
//	                  aside) and every other ether type
//	forward:          no DHCP across the Pod's interface, either way, and
//	                  no ARP for the bridge's own address out of it
//	input, output:    the bridge's link-local address never on the Pod's
//	                  interface (every bridge binding's bridge has it)
//
// A layer-2 binding (a Multus network without IPAM) has the MAC rule
// only: the guest brings its own addresses and protocols there. A Multus
// network with IPAM has them all, in a table of its bridge's name.
func (b Bridge) rules(ns *os.File) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t, err := replaceTable(c, nftables.TableFamilyBridge, b.table())
	if err != nil {
		return err
	}
	fromTap := ifname(expr.MetaKeyIIFNAME, b.Tap)
	counted := []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}
	spoof := c.AddChain(&nftables.Chain{Name: "antispoof", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw})
	c.AddRule(&nftables.Rule{Table: t, Chain: spoof, UserData: []byte(counterMAC), Exprs: concat(fromTap,
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: b.MAC},
		}, counted)})
	if b.serves() {
		b.addressRules(c, t, spoof)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s (bridge): %w", b.table(), err)
	}
	return nil
}

// addressRules adds to t the rules of a binding whose guest has the Pod's
// address: see rules.
func (b Bridge) addressRules(c *nftables.Conn, t *nftables.Table, spoof *nftables.Chain) {
	podIP := b.Link.Address.Addr().AsSlice()
	server := podnetwork.BridgeServerAddress.AsSlice()
	zero := net.IPv4zero.To4()
	fromTap := ifname(expr.MetaKeyIIFNAME, b.Tap)
	fromPod := ifname(expr.MetaKeyIIFNAME, b.Interface())
	toPod := ifname(expr.MetaKeyOIFNAME, b.Interface())
	drop := []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}
	counted := []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}

	c.AddRule(&nftables.Rule{Table: t, Chain: spoof, Exprs: concat(fromTap,
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 12, Len: 2},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: be16(etherIPv4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: be16(etherARP)},
		}, drop)})
	c.AddRule(&nftables.Rule{Table: t, Chain: spoof, UserData: []byte(counterAddress), Exprs: concat(fromTap, etherType(etherIPv4),
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: podIP},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: zero},
		}, counted)})
	c.AddRule(&nftables.Rule{Table: t, Chain: spoof, UserData: []byte(counterAddress), Exprs: concat(fromTap, etherType(etherARP),
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: arpSenderIP, Len: 4},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: podIP},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: zero},
		}, counted)})

	fwd := c.AddChain(&nftables.Chain{Name: "isolate", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: concat(toPod, etherType(etherIPv4), l4proto(unix.IPPROTO_UDP), dport(67), drop)})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: concat(fromPod, etherType(etherIPv4), l4proto(unix.IPPROTO_UDP), dport(68), drop)})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: concat(toPod, etherType(etherARP), nhEquals(arpTargetIP, server), drop)})

	in := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: concat(fromPod, etherType(etherARP), nhEquals(arpTargetIP, server), drop)})
	c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: concat(fromPod, etherType(etherIPv4), nhEquals(16, server), drop)})

	out := c.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: concat(toPod, etherType(etherARP), nhEquals(arpSenderIP, server), drop)})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: concat(toPod, etherType(etherIPv4), nhEquals(12, server), drop)})
}

// Offsets in an Ethernet/IPv4 ARP message.
const (
	arpSenderIP = 14
	arpTargetIP = 24
)

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

func etherType(t uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 12, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(t)},
	}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(p)},
	}
}

// nhEquals matches 4 bytes of the network header at offset.
func nhEquals(offset uint32, data []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data},
	}
}
