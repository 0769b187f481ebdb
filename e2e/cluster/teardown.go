package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopContainers stops the containerd shims of this cluster (found by the
// containerd socket in their command line), which the pods' processes hang
// off; containerd itself leaves them running by design.
func (c *Cluster) stopContainers(sock string) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && strings.Contains(string(cmdline), sock) {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		// Killing a shim's process group takes the pod's containers with it.
		_ = terminate(pid, 5*time.Second)
	}
	if len(pids) > 0 {
		c.progress("%-24s stopped %d container shims", "containers", len(pids))
	}
	return nil
}

// wipe unmounts everything under Home and removes all state but the build
// cache and the bin links.
func (c *Cluster) wipe() error {
	if err := c.unmountAll(c.Home); err != nil {
		return err
	}
	for _, d := range []string{"pki", "run", "logs", "etc", "data", "forge", "kubeconfig"} {
		if err := os.RemoveAll(c.path(d)); err != nil {
			return fmt.Errorf("removing %s: %w", c.path(d), err)
		}
	}
	if err := c.wipeOutsideHome(); err != nil {
		return err
	}
	c.progress("%-24s removed (build cache kept in %s)", "state", c.path("cache"))
	return nil
}

// wipeOutsideHome removes what a testbed keeps on this machine outside its
// Home: the nodes' directories, the kubelet's root, the Pod egress rules
// and the CNI files of the testbed and the network add-ons.
func (c *Cluster) wipeOutsideHome() error {
	if err := c.unmountAll(); err != nil {
		return err
	}
	for _, d := range c.outsideHome() {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	if err := removePodEgress(); err != nil {
		return fmt.Errorf("removing the Pod egress masquerade: %w", err)
	}
	if err := wipeCNI(); err != nil {
		return fmt.Errorf("removing the testbed's CNI files: %w", err)
	}
	return nil
}

// outsideHome are the directories a testbed keeps outside its Home.
func (c *Cluster) outsideHome() []string {
	return []string{NodeRoot, SharedRoot, c.KubeletRoot(), NodesRoot}
}

// forgetEarlierTestbed clears, for a Home that has no cluster yet, what a
// testbed of another Home (removed without `tekvirt down --wipe`) left
// outside it: its add-ons' CNI files would make the new nodes' Pods talk
// to the API server with the old cluster's credentials, and its volumes
// would seem to be the new cluster's.
func (c *Cluster) forgetEarlierTestbed() error {
	if _, err := os.Stat(filepath.Join(c.pkiDir(), "ca.crt")); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", APIServerPort), time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("%s has no cluster yet, but an API server listens on port %d: a testbed of another TEKVIRT_HOME runs; stop it first (TEKVIRT_HOME=<its home> tekvirt down)", c.Home, APIServerPort)
	}
	if err := c.wipeOutsideHome(); err != nil {
		return fmt.Errorf("removing what an earlier testbed left: %w", err)
	}
	return nil
}

// unmountAll lazily unmounts every mount below the kubelet's root (the
// pod volume mounts the kubelet left, and its root's own bind mount), the
// other directories outside Home and the extra roots, deepest first.
func (c *Cluster) unmountAll(roots ...string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	roots = append(roots, c.outsideHome()...)
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && below(fields[4], roots) {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			return fmt.Errorf("unmounting %s: %w", m, err)
		}
	}
	return nil
}

// below says whether path is one of roots or beneath one.
func below(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

// stopVMs destroys every domain of the cluster's libvirtd: QEMU outlives
// libvirtd, and the VMs' launchers end with their domains. VMIs still in
// the API are reported ended by the handler on the next `up`.
func (c *Cluster) stopVMs() error {
	// A socket left by a libvirtd that is gone (the machine rebooted) has
	// no VMs behind it.
	if conn, err := net.Dial("unix", c.LibvirtSocket()); err != nil {
		return nil
	} else {
		conn.Close()
	}
	out, err := exec.Command("virsh", "-c", c.LibvirtURI(), "list", "--name").Output()
	if err != nil {
		return fmt.Errorf("listing VMs: %w", err)
	}
	n := 0
	for _, name := range strings.Fields(string(out)) {
		if out, err := exec.Command("virsh", "-c", c.LibvirtURI(), "destroy", name).CombinedOutput(); err != nil {
			return fmt.Errorf("destroying VM %s: %w: %s", name, err, out)
		}
		n++
	}
	if n > 0 {
		c.progress("%-24s destroyed %d", "VMs", n)
	}
	return nil
}
