package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// run runs a host command and reports its output when it fails.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func linkExists(name string) bool { return exec.Command("ip", "link", "show", name).Run() == nil }

// setUpNode makes an extra node's network namespace (a veth to the host's
// node bridge, its address and default route, a host route to its pod
// subnet), its mount namespace and its cgroup root. What exists is kept.
func (c *Cluster) setUpNode(n node) error {
	if err := c.setUpNodeNetwork(n); err != nil {
		return fmt.Errorf("node %s network: %w", n.name, err)
	}
	if err := c.setUpMountNS(n); err != nil {
		return fmt.Errorf("node %s mount namespace: %w", n.name, err)
	}
	if err := makeCgroupRoot(cgroupRoot(n)); err != nil {
		return fmt.Errorf("node %s cgroup root: %w", n.name, err)
	}
	return nil
}

// ensureNodeBridge makes the host's bridge to the extra nodes, with the
// host's end of their network, both families: its IPv6 address is also the
// first node's.
func ensureNodeBridge() error {
	if !linkExists(nodeBridge) {
		if err := run("ip", "link", "add", nodeBridge, "type", "bridge"); err != nil {
			return err
		}
	}
	for _, s := range [][]string{
		{"ip", "addr", "replace", fmt.Sprintf("%s/%d", nodeNetPrefix+"1", nodePrefixLen), "dev", nodeBridge},
		{"ip", "-6", "addr", "replace", fmt.Sprintf("%s/%d", nodeIP6(1), nodePrefixLen6), "dev", nodeBridge, "nodad"},
		{"ip", "link", "set", nodeBridge, "up"},
	} {
		if err := run(s...); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) setUpNodeNetwork(n node) error {
	hostEnd := nodeNetPrefix + "1"
	if err := ensureNodeBridge(); err != nil {
		return err
	}
	var steps [][]string
	if _, err := os.Stat(netnsPath(n)); err != nil {
		steps = append(steps, []string{"ip", "netns", "add", netnsName(n)})
	}
	if !linkExists(hostVeth(n)) {
		steps = append(steps, []string{"ip", "link", "add", hostVeth(n), "type", "veth", "peer", "name", "eth0", "netns", netnsName(n)})
	}
	in := func(args ...string) []string { return append([]string{"ip", "-n", netnsName(n)}, args...) }
	steps = append(steps,
		[]string{"ip", "link", "set", hostVeth(n), "master", nodeBridge, "up"},
		// The host's bridge sees its traffic through iptables (kube-proxy
		// needs that for its Pods' bridge): a node's packet to the first
		// node's NodePort whose endpoint is on that same node is DNATed at
		// the bridge and must go back out of the port it came in by.
		[]string{"bridge", "link", "set", "dev", hostVeth(n), "hairpin", "on"},
		in("link", "set", "lo", "up"),
		in("addr", "replace", fmt.Sprintf("%s/%d", n.ip, nodePrefixLen), "dev", "eth0"),
		in("-6", "addr", "replace", fmt.Sprintf("%s/%d", n.ip6, nodePrefixLen6), "dev", "eth0", "nodad"),
		in("link", "set", "eth0", "up"),
		in("route", "replace", "default", "via", hostEnd),
		in("-6", "route", "replace", "default", "via", nodeIP6(1).String()),
		[]string{"ip", "route", "replace", n.podSubnet(), "via", n.ip.String()},
		[]string{"ip", "-6", "route", "replace", n.podSubnet6(), "via", n.ip6.String()},
		// Pods' traffic is routed through the node; Services' rules see
		// bridged traffic, as on the first node.
		[]string{"ip", "netns", "exec", netnsName(n), "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"},
	)
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	if err := installPodEgress(netnsPath(n)); err != nil {
		return err
	}
	// Not present on every kernel inside a namespace; kube-proxy reports it.
	_ = run("ip", "netns", "exec", netnsName(n), "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1")
	return nil
}

// setUpMountNS makes the node's mount namespace: the host's mounts, with
// nodeBinds bound from the node's own directories. It is kept by a bind
// mount of its namespace file, on a private mount as the kernel requires.
func (c *Cluster) setUpMountNS(n node) error {
	dir := c.mountNSDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if mounted, err := isMountPoint(dir); err != nil {
		return err
	} else if !mounted {
		if err := run("mount", "--bind", dir, dir); err != nil {
			return err
		}
	}
	if err := run("mount", "--make-private", dir); err != nil {
		return err
	}
	file := c.mountNSPath(n)
	if mounted, err := isMountPoint(file); err != nil || mounted {
		return err
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		return err
	}
	script := []string{"set -e"}
	for _, b := range nodeBinds {
		src := filepath.Join(nodeDir(n.name), b)
		for _, d := range []string{src, b} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		// The host's own mounts there (the first kubelet's root, shared)
		// come first off: a second mount stacked on the same point is not
		// the one containerd checks.
		script = append(script, fmt.Sprintf("while mountpoint -q %[1]q; do umount -l %[1]q; done; mount --bind %[2]q %[1]q", b, src))
	}
	// Shared, as the first node's: containerd refuses a Bidirectional
	// hostPath (the handler's containerDisk mounts) on any other mount.
	script = append(script, "mount --make-rshared /var/lib/kubelet")
	// Slave: the host's later mounts reach the node, the node's never reach
	// the host (nor another node).
	return run("unshare", "--mount="+file, "--propagation", "slave", "sh", "-c", strings.Join(script, "\n"))
}

// cgroupHierarchies are the cgroup v1 hierarchies mounted here.
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out, nil
}

// makeCgroupRoot creates a kubelet's cgroup root in every hierarchy; the
// kubelet refuses a root that does not exist. A cpuset cgroup starts with no
// CPUs and memory nodes: it gets its parent's.
func makeCgroupRoot(root string) error {
	if root == "" {
		return nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", root), 0o755)
	}
	dirs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range dirs {
		d := filepath.Join(h, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(d, f), err)
			}
		}
	}
	return nil
}

// removeCgroupRoot removes a cgroup root and what the kubelet made below it,
// deepest first; a cgroup still holding a process stays and is reported.
func removeCgroupRoot(root string) error {
	if root == "" {
		return nil
	}
	dirs := []string{"/sys/fs/cgroup"}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		if dirs, err = cgroupHierarchies(); err != nil {
			return err
		}
	}
	var errs []error
	for _, h := range dirs {
		var tree []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				tree = append(tree, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(tree)))
		for _, d := range tree {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// tearDownNode removes what setUpNode made, once the node's processes are
// stopped: its namespaces (with every mount made in them), its links and
// route, and its cgroup root. The host bridge goes with the last node.
func (c *Cluster) tearDownNode(n node) error {
	var errs []error
	if mounted, _ := isMountPoint(c.mountNSPath(n)); mounted {
		errs = append(errs, syscall.Unmount(c.mountNSPath(n), syscall.MNT_DETACH))
	}
	_ = os.Remove(c.mountNSPath(n))
	if _, err := os.Stat(netnsPath(n)); err == nil {
		errs = append(errs, run("ip", "netns", "del", netnsName(n)))
	}
	if linkExists(hostVeth(n)) {
		errs = append(errs, run("ip", "link", "del", hostVeth(n)))
	}
	_ = run("ip", "route", "del", n.podSubnet())
	_ = run("ip", "-6", "route", "del", n.podSubnet6())
	errs = append(errs, removeCgroupRoot(cgroupRoot(n)))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	c.progress("%-24s removed its namespaces, links and cgroups", "node "+n.name)
	return nil
}

// removeNodeBridge deletes the host's bridge to the extra nodes.
func removeNodeBridge() error {
	if !linkExists(nodeBridge) {
		return nil
	}
	return run("ip", "link", "del", nodeBridge)
}
