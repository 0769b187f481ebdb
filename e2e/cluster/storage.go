package cluster

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// storagePoolSize is the apparent size of the sparse pool file; it takes
// disk space only as volumes fill.
const storagePoolSize = "40G"

// StorageRoot is the directory the hostpath storage puts volumes in;
// the VMs' QEMU opens their disk.img there.
func (c *Cluster) StorageRoot() string { return filepath.Join(NodeRoot, "storage") }

func (c *Cluster) storagePoolFile() string { return c.path("data", "storage.xfs") }

// ensureStorage mounts an XFS pool with reflink on a loop file at
// StorageRoot, so clones can share blocks; where loop devices or XFS are not
// available, volumes live in a plain directory and clones copy.
func (c *Cluster) ensureStorage() error {
	root := c.StorageRoot()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if mounted, err := isMountPoint(root); err != nil || mounted {
		return err
	}
	pool := c.storagePoolFile()
	if _, err := os.Stat(pool); os.IsNotExist(err) {
		if out, err := exec.Command("truncate", "-s", storagePoolSize, pool).CombinedOutput(); err != nil {
			return fmt.Errorf("creating storage pool file: %w: %s", err, out)
		}
		if out, err := exec.Command("mkfs.xfs", "-q", "-m", "reflink=1", pool).CombinedOutput(); err != nil {
			os.Remove(pool)
			c.progress("%-24s plain directory (mkfs.xfs failed: %s)", "storage", strings.TrimSpace(string(out)))
			return nil
		}
	}
	if out, err := exec.Command("mount", "-o", "loop", pool, root).CombinedOutput(); err != nil {
		c.progress("%-24s plain directory, no reflink (loop mount failed: %s)", "storage", strings.TrimSpace(string(out)))
		return nil
	}
	c.progress("%-24s XFS pool with reflink mounted at %s", "storage", root)
	return nil
}

// unmountStorage unmounts the pool if Up mounted it.
func (c *Cluster) unmountStorage() error {
	root := c.StorageRoot()
	mounted, err := isMountPoint(root)
	if err != nil || !mounted {
		return err
	}
	if err := syscall.Unmount(root, 0); err != nil {
		return fmt.Errorf("unmounting storage pool %s (a pod still using a volume?): %w", root, err)
	}
	return nil
}

func isMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}
