package cluster

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/tekvirt/tekvirt/e2e/cluster/netpolqueue"
)

// podEgressTable masquerades, on each node, Pod traffic that leaves the
// Pod network, as kindnet and flannel do: Pods reach each other across
// nodes at their own addresses (the Kubernetes network model, which
// NetworkPolicy peers rest on), and anything else with the node's. IPv4
// only: the cluster's IPv6 goes no further than its nodes, which route
// every Pod subnet.
const podEgressTable = "tekvirt-pod-egress"

// installPodEgress replaces the node's masquerade table in the network
// namespace at netnsPath ("" for this process's, the first node's).
func installPodEgress(netnsPath string) error {
	var opts []nftables.ConnOption
	if netnsPath != "" {
		f, err := os.Open(netnsPath)
		if err != nil {
			return err
		}
		defer f.Close()
		opts = append(opts, nftables.WithNetNSFd(int(f.Fd())))
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	pods := netip.MustParsePrefix(podCIDR)
	multicast := netip.MustParsePrefix("224.0.0.0/4")
	table := &nftables.Table{Name: podEgressTable, Family: nftables.TableFamilyIPv4}
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)
	chain := conn.AddChain(&nftables.Chain{
		Name:     "postrouting",
		Table:    table,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityNATSource,
	})
	exprs := netpolqueue.PrefixMatch(pods, true, expr.CmpOpEq)
	exprs = append(exprs, netpolqueue.PrefixMatch(pods, false, expr.CmpOpNeq)...)
	exprs = append(exprs, netpolqueue.PrefixMatch(multicast, false, expr.CmpOpNeq)...)
	exprs = append(exprs, &expr.Masq{})
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("installing table %s: %w", podEgressTable, err)
	}
	return nil
}

// removePodEgress deletes the first node's masquerade table, if it is
// there (the extra nodes' go with their namespaces).
func removePodEgress() error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return fmt.Errorf("listing tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == podEgressTable {
			conn.DelTable(t)
			return conn.Flush()
		}
	}
	return nil
}
