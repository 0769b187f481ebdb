package netpolqueue

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// TableName is the table the rules live in, one per address family.
const TableName = "tekvirt-netpol-queue"

// Config is what to steer where.
type Config struct {
	// PodCIDR is the cluster's Pod network: connections from or to it are
	// queued.
	PodCIDR netip.Prefix
	// Queue is the agent's queue number (its --nfqueue-id).
	Queue uint16
	// FailOpen accepts packets while no one reads the queue (the agent's
	// --fail-open); otherwise they are dropped.
	FailOpen bool
}

// family is the table family of c's Pod network.
func (c Config) family() nftables.TableFamily {
	if c.PodCIDR.Addr().Is4() {
		return nftables.TableFamilyIPv4
	}
	return nftables.TableFamilyIPv6
}

// nfqueueTarget is the xtables NFQUEUE target, revision 3 (struct
// xt_NFQ_info_v3: queue number, number of queues, flags), padded to the
// 8-byte alignment xtables gives target data.
func nfqueueTarget(queue uint16, bypass bool) *expr.Target {
	const flagBypass = 0x01 // NFQ_FLAG_BYPASS
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], queue)
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], flagBypass)
	}
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}

// PrefixMatch compares the source (or destination) address of a packet
// with prefix: op CmpOpEq matches addresses in it, CmpOpNeq the others.
func PrefixMatch(prefix netip.Prefix, source bool, op expr.CmpOp) []expr.Any {
	offset, size := uint32(16), uint32(4) // IPv4 header: daddr at 16
	if !prefix.Addr().Is4() {
		offset, size = 24, 16 // IPv6 header: daddr at 24
	}
	if source {
		offset -= size
	}
	mask := make([]byte, size)
	for i := 0; i < prefix.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: mask, Xor: make([]byte, size)},
		&expr.Cmp{Op: op, Register: 1, Data: prefix.Masked().Addr().AsSlice()},
	}
}

// rules are the chain's rules, in order: connections already decided and
// the node's own root processes (the kubelet's probes) pass, as the agent
// itself lets them; the first packets of connections from or to a Pod go
// to the queue.
func (c Config) rules() [][]expr.Any {
	established := []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
	rootProcess := []expr.Any{
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
	out := [][]expr.Any{established, rootProcess}
	for _, source := range []bool{true, false} {
		out = append(out, append(PrefixMatch(c.PodCIDR, source, expr.CmpOpEq), nfqueueTarget(c.Queue, c.FailOpen)))
	}
	return out
}

// Install replaces the table of c's family in the network namespace conn
// works in with the steering rules, in one transaction.
func Install(conn *nftables.Conn, c Config) error {
	if !c.PodCIDR.IsValid() {
		return fmt.Errorf("no Pod network to steer")
	}
	table := &nftables.Table{Name: TableName, Family: c.family()}
	// Add, delete and add again: a fresh table whether or not it was there.
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)
	// Where the agent's own chain would be: after the forward decisions
	// and DNAT (Service traffic is seen at its Pod), before SNAT.
	chain := conn.AddChain(&nftables.Chain{
		Name:     "postrouting",
		Table:    table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATSource - 5),
	})
	for _, exprs := range c.rules() {
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("installing table %s (queue %d for %s): %w", TableName, c.Queue, c.PodCIDR, err)
	}
	return nil
}

// Remove deletes the table of c's family, if it is there.
func Remove(conn *nftables.Conn, c Config) error {
	table := &nftables.Table{Name: TableName, Family: c.family()}
	conn.AddTable(table)
	conn.DelTable(table)
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("removing table %s: %w", TableName, err)
	}
	return nil
}

// Installed reports whether the table of c's family is there.
func Installed(conn *nftables.Conn, c Config) (bool, error) {
	tables, err := conn.ListTablesOfFamily(c.family())
	if err != nil {
		return false, fmt.Errorf("listing tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == TableName {
			return true, nil
		}
	}
	return false, nil
}
