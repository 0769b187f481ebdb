package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Fixed addresses of the local cluster. They are the upstream defaults, so a
// port clash with another Kubernetes on this machine is reported, not hidden.
const (
	APIServerPort   = 6443
	RegistryAddr    = "127.0.0.1:5000"
	etcdClientAddr  = "127.0.0.1:2379"
	etcdPeerAddr    = "127.0.0.1:2380"
	serviceCIDR     = "10.96.0.0/12"
	podCIDR         = "10.244.0.0/16"
	kubernetesSvcIP = "10.96.0.1"
	cniBinDir       = "/usr/lib/cni"
)

// The cluster is dual-stack, IPv4 first (so single-stack Services and a
// Pod's status.podIP stay IPv4): its IPv6 ranges are unique local ones
// that only this machine routes.
const (
	serviceCIDR6 = "fd00:10:96::/112"
	podCIDR6     = "fd00:10:244::/56"
)

// Cluster is the local cluster rooted at Home ($TEKVIRT_HOME).
type Cluster struct {
	// Home holds all state: pki, configs, data, logs, run (PID files), bin, cache.
	Home string
	// Source is the tekvirt source tree, used to build tekvirt's own binaries
	// and the pinned tool modules under e2e/tools.
	Source string
	// NodeName and NodeIP identify the one node.
	NodeName string
	NodeIP   net.IP
	// Nodes is how many nodes Up makes (the machine itself and Nodes-1
	// extra ones); 0 keeps those a previous Up made.
	Nodes int
	// Forge makes Up run the local git forge and Pipelines-as-Code too.
	Forge bool
	// Out receives progress lines.
	Out   io.Writer
	start time.Time
	// tools memoizes toolModule per tool name.
	tools map[string]toolModule
	// proc is where process facts are read; nil means /proc.
	proc procReader
}

// New returns the cluster for home and source, detecting the node's name and address.
func New(home, source string, out io.Writer) (*Cluster, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("reading hostname: %w", err)
	}
	ip, err := defaultRouteIP()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(home)
	if err != nil {
		return nil, err
	}
	return &Cluster{Home: abs, Source: source, NodeName: strings.ToLower(host), NodeIP: ip, Out: out, start: time.Now()}, nil
}

// Kubeconfig is the admin kubeconfig users export.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Home, "kubeconfig") }

// BinDir holds kubectl, tkn and tekvirt for users.
func (c *Cluster) BinDir() string { return filepath.Join(c.Home, "bin") }

func (c *Cluster) pkiDir() string { return filepath.Join(c.Home, "pki") }

// KubeletRoot is the kubelet's --root-dir, where it keeps Pods' volumes:
// the default, which the handler DaemonSet's manifest names.
func (c *Cluster) KubeletRoot() string { return "/var/lib/kubelet" }

func (c *Cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.Home}, parts...)...)
}

func (c *Cluster) progress(format string, args ...any) {
	fmt.Fprintf(c.Out, "[%6s] %s\n", time.Since(c.start).Round(time.Second), fmt.Sprintf(format, args...))
}

// defaultRouteIP returns the IPv4 address of the interface holding the default route.
func defaultRouteIP() (net.IP, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("reading routes: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		iface, err := net.InterfaceByName(fields[0])
		if err != nil {
			return nil, err
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("no IPv4 address on the default-route interface: the node needs one")
}

// Up brings every component up, starting only what is not running, and
// installs Tekton and tekvirt into the cluster.
func (c *Cluster) Up(ctx context.Context) error {
	c.start = time.Now()
	if err := c.preflight(); err != nil {
		return err
	}
	if err := c.forgetEarlierTestbed(); err != nil {
		return err
	}
	for _, d := range []string{"pki", "run", "logs", "bin", "cache", "etc", "data"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	bins, err := c.buildAll(ctx)
	if err != nil {
		return err
	}
	if err := c.writeConfigs(); err != nil {
		return fmt.Errorf("writing configuration: %w", err)
	}
	if err := c.prepareHost(); err != nil {
		return err
	}
	for _, p := range c.processes(bins) {
		if err := c.ensure(ctx, p); err != nil {
			return err
		}
	}
	if err := c.upExtraNodes(ctx, bins); err != nil {
		return err
	}
	if err := c.install(ctx, bins); err != nil {
		return err
	}
	if c.Forge {
		if err := c.upForge(ctx); err != nil {
			return fmt.Errorf("the forge: %w", err)
		}
	} else if err := c.downForge(); err != nil {
		return fmt.Errorf("stopping the forge: %w", err)
	}
	c.progress("cluster is up")
	fmt.Fprintf(c.Out, "\nexport KUBECONFIG=%s\nexport PATH=%s:$PATH\n", c.Kubeconfig(), c.BinDir())
	return nil
}

// Down stops what Up started, in reverse order. With wipe it also removes
// all state under Home except the build cache.
func (c *Cluster) Down(wipe bool) error {
	c.start = time.Now()
	var errs []error
	made := c.madeIndexes()
	for i := len(made) - 1; i >= 0; i-- {
		errs = append(errs, c.downExtraNode(c.extraNode(made[i])))
	}
	errs = append(errs, removeNodeBridge())
	errs = append(errs, c.stop(c.giteaProcess()))
	procs := c.processes(c.knownBinaries())
	for i := len(procs) - 1; i >= 0; i-- {
		switch procs[i].name {
		case "containerd":
			errs = append(errs, c.stopContainers(c.containerdSocket()))
		case "libvirtd":
			errs = append(errs, c.stopVMs())
		}
		errs = append(errs, c.stop(procs[i]))
	}
	errs = append(errs, c.unmountStorage())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !wipe {
		return nil
	}
	return c.wipe()
}

// ComponentStatus is one line of Status.
type ComponentStatus struct {
	Name    string
	PID     int
	LogFile string
}

// Status lists every component and its PID (0 when not running).
func (c *Cluster) Status() []ComponentStatus {
	var out []ComponentStatus
	procs := c.processes(c.knownBinaries())
	for _, i := range c.madeIndexes() {
		procs = append(procs, c.nodeProcesses(c.knownBinaries(), c.extraNode(i))...)
	}
	if _, err := os.Stat(c.ForgeEnv()); err == nil {
		procs = append(procs, c.giteaProcess())
	}
	for _, p := range procs {
		out = append(out, ComponentStatus{Name: p.name, PID: c.pid(p), LogFile: c.LogFile(p.name)})
	}
	return out
}
