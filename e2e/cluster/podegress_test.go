package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// TestInstallPodEgress: the kernel takes the masquerade table in a node's
// namespace, again over itself.
func TestInstallPodEgress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	name := fmt.Sprintf("tekvirt-test-egress-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	path := "/run/netns/" + name
	for range 2 {
		if err := installPodEgress(path); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Name: podEgressTable, Family: nftables.TableFamilyIPv4}
	rules, err := conn.GetRules(table, &nftables.Chain{Name: "postrouting", Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 {
		t.Fatalf("%d rules, want 1", len(rules))
	}
	if _, ok := rules[0].Exprs[len(rules[0].Exprs)-1].(*expr.Masq); !ok {
		t.Errorf("the rule ends with %#v, want masquerade", rules[0].Exprs[len(rules[0].Exprs)-1])
	}
}
