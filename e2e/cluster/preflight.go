package cluster

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostTools are the Debian executables the cluster needs, with their packages.
var hostTools = []struct{ path, pkg string }{
	{"/usr/bin/etcd", "etcd-server"},
	{"/usr/bin/containerd", "containerd"},
	{"/usr/sbin/runc", "runc"},
	{cniBinDir + "/bridge", "containernetworking-plugins"},
	{"/usr/sbin/iptables", "iptables"},
	{"/usr/sbin/libvirtd", "libvirt-daemon libvirt-daemon-driver-qemu"},
	{"/usr/sbin/virtlogd", "libvirt-daemon"},
	{"/usr/bin/qemu-system-x86_64", "qemu-system-x86"},
	{"/bin/busybox", "busybox-static"},
	{"/usr/bin/virsh", "libvirt-clients"},
	{"/usr/bin/qemu-img", "qemu-utils"},
	{"/sbin/mkfs.xfs", "xfsprogs"},
	{"/usr/sbin/depmod", "kmod"},
}

// What the testbed needs of the machine: memory for the control plane, a
// node and a few guests; disk for the builds of Kubernetes, Tekton and
// tekvirt, the images and the volumes the first time, and for volumes and
// images after.
const (
	minMemory         = 4 << 30
	minDiskFirstRun   = 20 << 30
	minDiskLaterRuns  = 5 << 30
	setupHostAdvice   = "run .ci/setup-host from tekvirt's source tree, which installs them all"
	firstRunCacheGlob = "cache/kubernetes-*"
)

// preflight checks, before anything is built or started, what up needs of
// the machine, and says what to do about what is missing.
func (c *Cluster) preflight() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("tekvirt up runs a kubelet, containerd and libvirtd and must run as root: run it as root, e.g. sudo -E env PATH=\"$PATH\" go run ./cmd/tekvirt up")
	}
	var missing []string
	for _, t := range hostTools {
		if _, err := os.Stat(t.path); err != nil {
			missing = append(missing, t.pkg)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing Debian packages %s: %s, or apt-get install -y %s", strings.Join(missing, ", "), setupHostAdvice, strings.Join(missing, " "))
	}
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("the go command is needed to build the cluster's binaries (Go 1.26.4 or later on PATH): %w", err)
	}
	dynamic, err := isDynamic("/bin/busybox")
	if err != nil {
		return fmt.Errorf("reading /bin/busybox: %w", err)
	}
	if dynamic {
		return fmt.Errorf("/bin/busybox is dynamically linked; images need the static one: apt-get install -y busybox-static")
	}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Home, 0o755); err != nil {
		return err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(c.Home, &fs); err != nil {
		return fmt.Errorf("free space of %s: %w", c.Home, err)
	}
	built, _ := filepath.Glob(filepath.Join(c.Home, firstRunCacheGlob))
	return checkCapacity(mem, fs.Bavail*uint64(fs.Bsize), len(built) > 0, c.Home)
}

// checkCapacity says what is short of the machine's memory and of the free
// disk space where home is; a first run (nothing built yet) needs more disk.
func checkCapacity(memTotal, diskFree uint64, built bool, home string) error {
	var short []string
	if memTotal < minMemory {
		short = append(short, fmt.Sprintf("%s of memory, the machine has %s", gib(minMemory), gib(memTotal)))
	}
	need, why := uint64(minDiskLaterRuns), "for volumes and images"
	if !built {
		need, why = minDiskFirstRun, "the first time, for the builds, images and volumes"
	}
	if diskFree < need {
		short = append(short, fmt.Sprintf("%s free on the file system of %s %s, it has %s (free some, or set TEKVIRT_HOME to a larger one)", gib(need), home, why, gib(diskFree)))
	}
	if len(short) > 0 {
		return fmt.Errorf("tekvirt up needs %s", strings.Join(short, "; and "))
	}
	return nil
}

func gib(n uint64) string { return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB" }

// memTotal reads MemTotal from a meminfo file.
func memTotal(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseUint(fields[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no MemTotal in %s", path)
}

// isDynamic reports whether an ELF file needs a dynamic loader.
func isDynamic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true, nil
		}
	}
	return false, nil
}
