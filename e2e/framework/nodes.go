package framework

import (
	"context"
	"net"
	"os"
	"sort"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
)

// WantNodes is how many nodes the cluster under test has:
// TEKVIRT_E2E_NODES (`make e2e` sets it to the --nodes it brought the
// cluster up with), else 1.
func WantNodes() int {
	if n, err := strconv.Atoi(os.Getenv("TEKVIRT_E2E_NODES")); err == nil && n > 0 {
		return n
	}
	return 1
}

// Nodes lists the cluster's node names, the machine's own first (extra
// nodes are named after it with a suffix).
func (f *Framework) Nodes(t testing.TB) []string {
	t.Helper()
	list, err := f.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Slice(names, func(i, j int) bool {
		return len(names[i]) < len(names[j]) || len(names[i]) == len(names[j]) && names[i] < names[j]
	})
	return names
}

// TwoNodes returns the first two nodes for a scenario that needs them. On a
// one-node cluster the scenario fails when the run was meant to have more
// (WantNodes) and is skipped, saying how to run it, otherwise.
func (f *Framework) TwoNodes(t testing.TB) (string, string) {
	t.Helper()
	names := f.Nodes(t)
	if len(names) < 2 {
		if WantNodes() >= 2 {
			t.Fatalf("the run expects %d nodes, the cluster has %v", WantNodes(), names)
		}
		t.Skipf("needs two nodes, the cluster has %v: `tekvirt up --nodes 2` (make e2e does)", names)
	}
	return names[0], names[1]
}

// HostPath is where this machine holds the file node sees at path.
func HostPath(node, path string) string { return cluster.HostPath(node, path) }

// NodeNamespaces is how to run a process as extra node name would
// (cluster.Cluster.NodeNamespaces); ok is false for the first node.
func (f *Framework) NodeNamespaces(name string) (netns, mountns string, ip net.IP, ok bool) {
	return (&cluster.Cluster{Home: f.Home}).NodeNamespaces(name)
}
