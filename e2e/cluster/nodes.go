package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Addresses and paths of the nodes beyond the first. Their addresses are in
// a range only this machine routes: the host's end of their bridge is .1,
// node i is .i.
const (
	nodeBridge     = "tekvirt-nodes"
	nodeNet        = "10.245.0.0/24"
	nodeNetPrefix  = "10.245.0."
	nodePrefixLen  = 24
	podSubnetFirst = "10.244.%d.0/24"
	// The IPv6 side: node i is nodeNet6Prefix+i (the first node's address
	// is the host's end of the bridge), its Pods in podSubnet6First.
	nodeNet6Prefix  = "fd00:10:245::"
	nodePrefixLen6  = 64
	podSubnet6First = "fd00:10:244:%x::/64"
	// NodesRoot holds, per extra node, the directories its mount namespace
	// shows at the paths a node has (/var/lib/kubelet, /var/lib/tekvirt).
	NodesRoot = "/var/lib/tekvirt-nodes"
	// maxNodes keeps node indexes within one octet and interface names short.
	maxNodes = 32
)

// node is one node of the cluster. The first is the machine itself. Each
// other is a kubelet, containerd and kube-proxy in a network namespace and
// a mount namespace of its own, joined to the same control plane.
type node struct {
	index int
	name  string
	ip    net.IP
	// ip6 is its IPv6 address, on the node bridge.
	ip6 net.IP
}

func (n node) first() bool { return n.index == 1 }

// podSubnet is the range the node's CNI bridge hands pod addresses from.
func (n node) podSubnet() string { return fmt.Sprintf(podSubnetFirst, n.index-1) }

// podSubnet6 is podSubnet's IPv6 counterpart.
func (n node) podSubnet6() string { return fmt.Sprintf(podSubnet6First, n.index-1) }

// nodeIPs is the kubelet's --node-ip: IPv4 first, as the cluster's ranges.
func (n node) nodeIPs() string { return n.ip.String() + "," + n.ip6.String() }

func nodeIP6(index int) net.IP { return net.ParseIP(fmt.Sprintf("%s%x", nodeNet6Prefix, index)) }

// proc names one of the node's processes (PID file, log).
func (n node) proc(name string) string {
	if n.first() {
		return name
	}
	return fmt.Sprintf("node%d-%s", n.index, name)
}

// firstNode is the machine itself.
func (c *Cluster) firstNode() node {
	return node{index: 1, name: c.NodeName, ip: c.NodeIP, ip6: nodeIP6(1)}
}

// extraNode is node i (i >= 2).
func (c *Cluster) extraNode(i int) node {
	return node{index: i, name: fmt.Sprintf("%s-node%d", c.NodeName, i), ip: net.ParseIP(nodeNetPrefix + strconv.Itoa(i)).To4(), ip6: nodeIP6(i)}
}

// nodes lists every node: the first and the extra ones Up was asked for
// (Nodes), or, when Nodes is 0, those a previous Up made.
func (c *Cluster) nodes() []node {
	out := []node{c.firstNode()}
	for _, i := range c.extraIndexes() {
		out = append(out, c.extraNode(i))
	}
	return out
}

func (c *Cluster) extraIndexes() []int {
	if c.Nodes > 0 {
		var out []int
		for i := 2; i <= c.Nodes; i++ {
			out = append(out, i)
		}
		return out
	}
	return c.madeIndexes()
}

// madeIndexes are the extra nodes whose configuration a previous Up wrote.
func (c *Cluster) madeIndexes() []int {
	entries, _ := os.ReadDir(c.path("etc", "nodes"))
	var out []int
	for _, e := range entries {
		if i, err := strconv.Atoi(e.Name()); err == nil && i >= 2 {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// etc is the path of one of n's configuration files.
func (c *Cluster) etc(n node, file string) string {
	if n.first() {
		return c.path("etc", file)
	}
	return c.path("etc", "nodes", strconv.Itoa(n.index), file)
}

// runDir holds n's sockets and runtime state.
func (c *Cluster) runDir(n node) string {
	if n.first() {
		return c.path("run")
	}
	return c.path("run", "nodes", strconv.Itoa(n.index))
}

func (c *Cluster) dataDir(n node) string {
	if n.first() {
		return c.path("data")
	}
	return c.path("data", "nodes", strconv.Itoa(n.index))
}

func (c *Cluster) containerdSocketOf(n node) string {
	return filepath.Join(c.runDir(n), "containerd", "containerd.sock")
}

func (c *Cluster) containerdSocket() string { return c.containerdSocketOf(c.firstNode()) }

// netnsName is the network namespace of an extra node (`ip netns exec NAME`).
func netnsName(n node) string { return fmt.Sprintf("tekvirt-node%d", n.index) }

func netnsPath(n node) string { return "/run/netns/" + netnsName(n) }

// mountNSDir holds the files that keep the extra nodes' mount namespaces;
// it is a private mount, which a namespace file must be on.
func (c *Cluster) mountNSDir() string { return c.path("run", "mountns") }

func (c *Cluster) mountNSPath(n node) string {
	return filepath.Join(c.mountNSDir(), strconv.Itoa(n.index))
}

// hostVeth is the host's end of an extra node's link to nodeBridge.
func hostVeth(n node) string { return fmt.Sprintf("tvnode%d", n.index) }

// nodeDir holds what an extra node's mount namespace shows under its
// node paths.
func nodeDir(name string) string { return filepath.Join(NodesRoot, name) }

// nodeBinds are the paths an extra node has its own copy of, each bound in
// its mount namespace from the same-named directory under nodeDir: the
// DaemonSets' hostPaths, the kubelet's pod logs (each kubelet collects the
// logs of pods it does not know), the CNI plugins' address leases, the
// pods' network namespace files and the CNI directories the network
// add-ons install into.
var nodeBinds = []string{"/var/lib/kubelet", NodeRoot, "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/netns", CNIConfDir, CNIBinDir}

// HostPath maps a path as the named node sees it to the same file's path on
// this machine: the node's own directory for the paths an extra node has
// its own copy of, else the path itself (the first node is this machine).
// Mounts made inside an extra node (pods' secrets, containerDisks) are not
// visible on the host.
func HostPath(nodeName, path string) string {
	if st, err := os.Stat(nodeDir(nodeName)); nodeName == "" || err != nil || !st.IsDir() {
		return path
	}
	return pathIn(nodeDir(nodeName), path)
}

// pathIn is path under an extra node's directory dir.
func pathIn(dir, path string) string {
	for _, b := range nodeBinds {
		if path == b || strings.HasPrefix(path, b+"/") {
			return filepath.Join(dir, b, strings.TrimPrefix(path, b))
		}
	}
	return path
}

// cgroupRoot is the kubelet's --cgroup-root: two kubelets on one cgroup v1
// machine must not share one.
func cgroupRoot(n node) string {
	if n.first() {
		return ""
	}
	return "/" + netnsName(n)
}

// NodeNamespaces is how to run a process as on the extra node named name
// would run: its network and mount namespaces' files (nsenter --net
// --mount) and its address. ok is false for the first node (this machine
// itself) and names that are not an extra node's.
func (c *Cluster) NodeNamespaces(name string) (netns, mountns string, ip net.IP, ok bool) {
	i := strings.LastIndex(name, "-node")
	if i < 0 {
		return "", "", nil, false
	}
	idx, err := strconv.Atoi(name[i+len("-node"):])
	if err != nil || idx < 2 {
		return "", "", nil, false
	}
	n := c.extraNode(idx)
	return netnsPath(n), c.mountNSPath(n), n.ip, true
}
