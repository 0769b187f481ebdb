package netpolqueue

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

func TestListening(t *testing.T) {
	// As the kernel prints it: queue, peer port id, queued, copy mode,
	// copy range, dropped, user dropped, last id, 1.
	const two = "  100  42817     0 2    65531     0     0        7  1\n  101  42818     0 2    65531     0     0        0  1\n"
	for _, tc := range []struct {
		name, file string
		queue      uint16
		want       bool
		wantErr    bool
	}{
		{"listened", two, 100, true, false},
		{"second line", two, 101, true, false},
		{"another queue", two, 98, false, false},
		{"none", "", 100, false, false},
		{"garbage", "queue?\n", 100, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Listening(strings.NewReader(tc.file), tc.queue)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Listening(%q, %d) = %v, %v; want %v, error %v", tc.file, tc.queue, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestPrefixMatch(t *testing.T) {
	for _, tc := range []struct {
		prefix         string
		source         bool
		offset, length uint32
		mask, addr     []byte
	}{
		{"10.244.0.0/16", true, 12, 4, []byte{255, 255, 0, 0}, []byte{10, 244, 0, 0}},
		{"10.244.3.7/24", false, 16, 4, []byte{255, 255, 255, 0}, []byte{10, 244, 3, 0}},
		{"fd00:10:244::/56", true, 8, 16, append([]byte{255, 255, 255, 255, 255, 255, 255}, make([]byte, 9)...), append([]byte{0xfd, 0, 0, 0x10, 0x02, 0x44}, make([]byte, 10)...)},
	} {
		exprs := PrefixMatch(netip.MustParsePrefix(tc.prefix), tc.source, expr.CmpOpEq)
		p, b, c := exprs[0].(*expr.Payload), exprs[1].(*expr.Bitwise), exprs[2].(*expr.Cmp)
		if p.Offset != tc.offset || p.Len != tc.length || string(b.Mask) != string(tc.mask) || string(c.Data) != string(tc.addr) {
			t.Errorf("%s source=%v: offset %d len %d mask %v addr %v; want %d %d %v %v", tc.prefix, tc.source, p.Offset, p.Len, b.Mask, c.Data, tc.offset, tc.length, tc.mask, tc.addr)
		}
	}
}

// freshNamespace is a new network namespace (ip netns), for the kernel
// to load the rules in; it needs root.
func freshNamespace(t *testing.T) *os.File {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	name := fmt.Sprintf("tekvirt-test-netpol-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestInstallLoadsInTheKernel: the kernel takes the rules (the xtables
// target through nft_compat), again over themselves, and they go.
func TestInstallLoadsInTheKernel(t *testing.T) {
	ns := freshNamespace(t)
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), Queue: 100},
		{PodCIDR: netip.MustParsePrefix("fd00:10:244::/56"), Queue: 7, FailOpen: true},
	} {
		for range 2 { // idempotent
			if err := Install(conn, c); err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
		}
		table := &nftables.Table{Name: TableName, Family: c.family()}
		rules, err := conn.GetRules(table, &nftables.Chain{Name: "postrouting", Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if len(rules) != 4 {
			t.Fatalf("%+v: %d rules, want 4", c, len(rules))
		}
		for _, r := range rules[2:] {
			target, ok := r.Exprs[len(r.Exprs)-1].(*expr.Target)
			if !ok || target.Name != "NFQUEUE" {
				t.Errorf("%+v: rule ends with %#v, want the NFQUEUE target", c, r.Exprs[len(r.Exprs)-1])
			}
		}
		if ok, err := Installed(conn, c); err != nil || !ok {
			t.Errorf("%+v: Installed = %v, %v", c, ok, err)
		}
		if err := Remove(conn, c); err != nil {
			t.Fatal(err)
		}
		if ok, err := Installed(conn, c); err != nil || ok {
			t.Errorf("%+v: Installed after Remove = %v, %v", c, ok, err)
		}
	}
}
