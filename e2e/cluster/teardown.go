package cluster

import (
	"bufio"
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
	if err := c.unmountAll(); err != nil {
		return err
	}
	for _, d := range []string{"pki", "run", "logs", "etc", "data", "forge", "kubeconfig"} {
		if err := os.RemoveAll(c.path(d)); err != nil {
			return fmt.Errorf("removing %s: %w", c.path(d), err)
		}
	}
	for _, d := range []string{NodeRoot, SharedRoot, c.KubeletRoot(), NodesRoot} {
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
	c.progress("%-24s removed (build cache kept in %s)", "state", c.path("cache"))
	return nil
}

// unmountAll lazily unmounts every mount below Home and the kubelet's
// root (the pod volume mounts the kubelet left, and its root's own bind
// mount), deepest first.
func (c *Cluster) unmountAll() error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (strings.HasPrefix(fields[4], c.Home+"/") ||
			fields[4] == c.KubeletRoot() || strings.HasPrefix(fields[4], c.KubeletRoot()+"/")) {
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
