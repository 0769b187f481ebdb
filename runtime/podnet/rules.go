package podnet

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
)

// TableName is the nftables table of the pod network's binding in the
// Pod's namespace (family ip for masquerade, bridge for bridge); a
// Multus network's bridge has its own, TableName-<bridge>.
const TableName = "tekvirt"

// rules replaces the binding's nftables tables in ns, family ip and, with
// ipv6, ip6 (where the IPv6 table is not wanted, it is removed):
//
//	prerouting (raw):   from the bridge, drop (and count) frames not from
//	                    the guest's MAC and packets not from its address
//	                    (DHCP's 0.0.0.0 aside; IPv6's link-local and
//	                    unspecified addresses, which neighbour discovery
//	                    needs and which are never forwarded)
//	prerouting (dnat):  in on the Pod's interface, tcp and udp (or only
//	                    Ports) to the guest
//	postrouting (snat): from the guest out of the Pod's interface,
//	                    masquerade
func (m Masquerade) rules(ns *os.File, ipv6 bool) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	families := []masqueradeFamily{{
		table: nftables.TableFamilyIPv4, nat: unix.NFPROTO_IPV4, saddr: 12, guest: m.Addresses.Guest.Addr(),
		alsoFrom: []netip.Addr{netip.IPv4Unspecified()},
	}}
	v6 := masqueradeFamily{
		table: nftables.TableFamilyIPv6, nat: unix.NFPROTO_IPV6, saddr: 8, guest: m.IPv6.Guest.Addr(),
		alsoFrom: []netip.Addr{netip.IPv6Unspecified()}, linkLocal: true,
	}
	if ipv6 {
		families = append(families, v6)
	} else if err := dropTable(c, nftables.TableFamilyIPv6, TableName); err != nil {
		return err
	}
	for _, f := range families {
		if err := m.familyRules(c, f); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s: %w", TableName, err)
	}
	return nil
}

// masqueradeFamily is what the binding's rules differ in between IPv4 and
// IPv6: the table's family and NAT's, where the source address is in the
// network header, the guest's address and the other sources it may use.
type masqueradeFamily struct {
	table     nftables.TableFamily
	nat       uint32
	saddr     uint32
	guest     netip.Addr
	alsoFrom  []netip.Addr
	linkLocal bool // fe80::/10 passes too
}

// familyRules adds f's table, replacing it, to c's batch.
func (m Masquerade) familyRules(c *nftables.Conn, f masqueradeFamily) error {
	t, err := replaceTable(c, f.table, TableName)
	if err != nil {
		return err
	}
	guest := f.guest.AsSlice()

	spoof := c.AddChain(&nftables.Chain{Name: "antispoof", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw})
	fromBridge := ifname(expr.MetaKeyIIFNAME, podnetwork.BridgeName)
	c.AddRule(&nftables.Rule{Table: t, Chain: spoof, UserData: []byte(counterMAC), Exprs: concat(fromBridge,
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: m.MAC},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictDrop},
		})})
	notFromGuest := []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddr, Len: uint32(len(guest))},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: guest},
	}
	for _, a := range f.alsoFrom {
		notFromGuest = append(notFromGuest, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: a.AsSlice()})
	}
	if f.linkLocal {
		notFromGuest = append(notFromGuest,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddr, Len: 2},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 2, Mask: []byte{0xff, 0xc0}, Xor: []byte{0, 0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0xfe, 0x80}},
		)
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: spoof, UserData: []byte(counterAddress), Exprs: concat(fromBridge, notFromGuest,
		[]expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}})})

	dnat := c.AddChain(&nftables.Chain{Name: "inbound", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	fromPod := ifname(expr.MetaKeyIIFNAME, podnetwork.PodInterface)
	toGuest := []expr.Any{
		&expr.Immediate{Register: 1, Data: guest},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.nat, RegAddrMin: 1},
	}
	if len(m.Ports) == 0 {
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			c.AddRule(&nftables.Rule{Table: t, Chain: dnat, Exprs: concat(fromPod, l4proto(proto), toGuest)})
		}
	}
	for _, p := range m.Ports {
		proto := byte(unix.IPPROTO_TCP)
		if p.Protocol == "udp" {
			proto = unix.IPPROTO_UDP
		}
		dport := []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(p.Port >> 8), byte(p.Port)}},
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: dnat, Exprs: concat(fromPod, l4proto(proto), dport, toGuest)})
	}

	snat := c.AddChain(&nftables.Chain{Name: "outbound", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: t, Chain: snat, Exprs: concat(
		ifname(expr.MetaKeyOIFNAME, podnetwork.PodInterface),
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddr, Len: uint32(len(guest))},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: guest},
			&expr.Masq{},
		})})
	return nil
}

// ifname matches the input or output interface's name.
func ifname(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b},
	}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func concat(parts ...[]expr.Any) []expr.Any { return slices.Concat(parts...) }

// Labels of the anti-spoofing rules' counters (the rules' user data).
const (
	counterMAC     = "antispoof:mac"
	counterAddress = "antispoof:address"
)

// replaceTable deletes the table name of family if it exists and adds it
// again, empty, in c's batch: the whole change is applied at once.
func replaceTable(c *nftables.Conn, family nftables.TableFamily, name string) (*nftables.Table, error) {
	tables, err := c.ListTablesOfFamily(family)
	if err != nil {
		return nil, fmt.Errorf("listing nftables tables: %w", err)
	}
	t := &nftables.Table{Family: family, Name: name}
	if slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == name }) {
		c.DelTable(t)
	}
	return c.AddTable(t), nil
}

// dropTable deletes the table name of family, if it exists, in c's batch.
func dropTable(c *nftables.Conn, family nftables.TableFamily, name string) error {
	tables, err := c.ListTablesOfFamily(family)
	if err != nil {
		return fmt.Errorf("listing nftables tables: %w", err)
	}
	if slices.ContainsFunc(tables, func(x *nftables.Table) bool { return x.Name == name }) {
		c.DelTable(&nftables.Table{Family: family, Name: name})
	}
	return nil
}

// Dropped is how many packets the anti-spoofing rules of the bindings in
// ns (masquerade or bridge, on the pod network and Multus ones) dropped:
// those from another MAC, and those from another address.
func Dropped(ns *os.File) (otherMAC, otherAddress uint64, err error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return 0, 0, fmt.Errorf("nftables: %w", err)
	}
	found := 0
	for _, family := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6, nftables.TableFamilyBridge} {
		tables, err := c.ListTablesOfFamily(family)
		if err != nil {
			return 0, 0, fmt.Errorf("listing nftables tables: %w", err)
		}
		for _, t := range tables {
			if t.Name != TableName && !strings.HasPrefix(t.Name, TableName+"-") {
				continue
			}
			rules, err := c.GetRules(t, &nftables.Chain{Name: "antispoof", Table: t})
			if err != nil {
				continue // no anti-spoofing chain in it
			}
			for _, r := range rules {
				for _, e := range r.Exprs {
					ctr, ok := e.(*expr.Counter)
					if !ok {
						continue
					}
					found++
					switch string(r.UserData) {
					case counterMAC:
						otherMAC += ctr.Packets
					case counterAddress:
						otherAddress += ctr.Packets
					}
				}
			}
		}
	}
	if found == 0 {
		return 0, 0, errors.New("no anti-spoofing rules with counters in the Pod's network namespace")
	}
	return otherMAC, otherAddress, nil
}
