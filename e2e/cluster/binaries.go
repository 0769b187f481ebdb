package cluster

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// binaries are the paths of every executable the cluster runs.
type binaries struct {
	kube    string // dir with kube-apiserver, kubelet, kubectl, ...
	tekton  string // dir with controller, webhook, entrypoint, ...
	tkn     string
	etcd    string // the hosted control planes' etcd (the cluster's own is Debian's)
	coredns string // the cluster DNS server
	multus  string // dir with multus, thin_entrypoint and the bridge and portmap CNI plugins
	netpol  string // the NetworkPolicy agent, kube-network-policies
	csi     string // dir with csi-provisioner, csi-snapshotter and snapshot-controller
	flannel string // flanneld, the hosted workers' pod network
	konn    string // dir with Konnectivity's server and agent, the hosted API servers' way in
	tekvirt string // dir with tekvirt, tekvirt-testbed, tekvirt-controller, tekvirt-step
}

func (b binaries) k(name string) string { return filepath.Join(b.kube, name) }

// ClientArchs are the architectures (linux) whose tekvirt CLI the
// downloads server offers.
var ClientArchs = []string{"amd64", "arm64"}

// client is the tekvirt CLI built for linux/arch.
func (b binaries) client(arch string) string {
	return filepath.Join(b.tekvirt, "clients", arch, "linux", "tekvirt")
}

// testbed is the testbed's own program, which serves the registry and the
// nodes' links to it.
func (b binaries) testbed() string { return filepath.Join(b.tekvirt, "tekvirt-testbed") }

// toolBuild is one pinned tools module under e2e/tools.
type toolBuild struct {
	name     string // folder under e2e/tools and cache prefix
	module   string // the required module whose version keys the cache
	pkgs     []string
	ldflags  func(version string) string
	coldHint string
	// paths maps a package to its import path where it is not
	// module/cmd/<package> (the module itself, or a main package of the
	// tools module).
	paths map[string]string
	// cgo and tags are for a tool that links C (Gitea's sqlite).
	cgo  bool
	tags string
}

var toolBuilds = []toolBuild{
	{
		name:   "kubernetes",
		module: "k8s.io/kubernetes",
		pkgs:   []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"},
		ldflags: func(v string) string {
			minor := strings.Split(v, ".")[1]
			var b strings.Builder
			b.WriteString("-s -w")
			for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
				fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean", pkg, v, pkg, pkg, minor, pkg)
			}
			return b.String()
		},
		coldHint: "~20 min on 2 cores the first time",
	},
	{
		name:     "tekton",
		module:   "github.com/tektoncd/pipeline",
		pkgs:     []string{"controller", "webhook", "entrypoint", "nop", "workingdirinit", "sidecarlogresults", "resolvers"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~10 min on 2 cores the first time",
	},
	{
		name:     "tkn",
		module:   "github.com/tektoncd/cli",
		pkgs:     []string{"tkn"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~5 min on 2 cores the first time",
	},
	{
		name:   "etcd",
		module: "go.etcd.io/etcd/server/v3",
		// The go command names the binary of go.etcd.io/etcd/server/v3
		// after its path less the major version: "server".
		pkgs:     []string{"server"},
		paths:    map[string]string{"server": "go.etcd.io/etcd/server/v3"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~3 min on 2 cores the first time",
	},
	{
		name:     "coredns",
		module:   "github.com/coredns/coredns",
		pkgs:     []string{"coredns"},
		paths:    map[string]string{"coredns": "github.com/tekvirt/tekvirt/e2e/tools/coredns"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~3 min on 2 cores the first time",
	},
	{
		name:   "multus",
		module: "gopkg.in/k8snetworkplumbingwg/multus-cni.v4",
		pkgs:   []string{"bridge", "portmap", "thin_entrypoint", "multus"},
		paths: map[string]string{"bridge": "github.com/containernetworking/plugins/plugins/main/bridge",
			"portmap": "github.com/containernetworking/plugins/plugins/meta/portmap"},
		// Multus's own version stamp, which its binaries print.
		ldflags: func(v string) string {
			return "-s -w -X gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus.version=" + v
		},
		coldHint: "~2 min on 2 cores the first time",
	},
	{
		name:   "netpol",
		module: "sigs.k8s.io/kube-network-policies",
		// The go command names the agent's binary after its folder.
		pkgs:     []string{"cmd"},
		paths:    map[string]string{"cmd": "sigs.k8s.io/kube-network-policies/cmd"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~3 min on 2 cores the first time",
	},
	{
		name:   "csi",
		module: "github.com/kubernetes-csi/external-provisioner/v5",
		pkgs:   []string{"csi-provisioner", "csi-snapshotter", "snapshot-controller"},
		paths: map[string]string{
			"csi-snapshotter":     "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter",
			"snapshot-controller": "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller",
		},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~4 min on 2 cores the first time",
	},
	{
		name:     "flannel",
		module:   "github.com/flannel-io/flannel",
		pkgs:     []string{"flannel"},
		paths:    map[string]string{"flannel": "github.com/tekvirt/tekvirt/e2e/tools/flannel"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~3 min on 2 cores the first time",
	},
	{
		name:   "konnectivity",
		module: "sigs.k8s.io/apiserver-network-proxy",
		// The go command names the binaries after their folders.
		pkgs:     []string{"server", "agent"},
		ldflags:  func(string) string { return "-s -w" },
		coldHint: "~2 min on 2 cores the first time",
	},
}

// importPath maps a tool's short package name to its import path.
func (t toolBuild) importPath(pkg string) string {
	if p, ok := t.paths[pkg]; ok {
		return p
	}
	return t.module + "/cmd/" + pkg
}

// toolModule is where a tools module's pinned module is: its version (the
// cache key) and its folder in the module cache (Tekton's release config).
type toolModule struct{ version, dir string }

// toolModule asks the go command once per tool which version of t.module
// the tools module pins and where it is.
func (c *Cluster) toolModule(t toolBuild) (toolModule, error) {
	if m, ok := c.tools[t.name]; ok {
		return m, nil
	}
	list := func() (string, string, error) {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", t.module)
		cmd.Dir = filepath.Join(c.Source, "e2e", "tools", t.name)
		out, err := cmd.Output()
		if err != nil {
			return "", "", fmt.Errorf("reading the %s version pinned in e2e/tools/%s: %w", t.module, t.name, err)
		}
		v, dir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		return v, dir, nil
	}
	v, dir, err := list()
	if err == nil && dir == "" {
		// Not in the module cache (the tool's binary was cached, its
		// source not needed until now): its files are read from there.
		dl := exec.Command("go", "mod", "download", t.module)
		dl.Dir = filepath.Join(c.Source, "e2e", "tools", t.name)
		if out, derr := dl.CombinedOutput(); derr != nil {
			return toolModule{}, fmt.Errorf("downloading %s: %w: %s", t.module, derr, out)
		}
		v, dir, err = list()
	}
	if err != nil {
		return toolModule{}, err
	}
	if c.tools == nil {
		c.tools = map[string]toolModule{}
	}
	c.tools[t.name] = toolModule{version: v, dir: dir}
	return c.tools[t.name], nil
}

// toolDir is where t's binaries at version are cached; a tools module
// with a program of its own (CoreDNS's plugin list) adds a digest of its
// source, so that a change to it builds again.
func (c *Cluster) toolDir(t toolBuild, version string) string {
	dir := c.path("cache", t.name+"-"+version)
	srcs, _ := filepath.Glob(filepath.Join(c.Source, "e2e", "tools", t.name, "*.go"))
	if len(srcs) == 0 {
		return dir
	}
	// Its requirements too: such a module pins more than t.module.
	srcs = append(srcs, filepath.Join(c.Source, "e2e", "tools", t.name, "go.mod"))
	h := sha256.New()
	for _, f := range srcs {
		data, err := os.ReadFile(f)
		if err != nil {
			return dir
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return fmt.Sprintf("%s-%x", dir, h.Sum(nil)[:4])
}

// buildTool builds t into its versioned cache folder unless it is there.
func (c *Cluster) buildTool(ctx context.Context, t toolBuild) (string, error) {
	m, err := c.toolModule(t)
	if err != nil {
		return "", err
	}
	v := m.version
	dir := c.toolDir(t, v)
	if _, err := os.Stat(filepath.Join(dir, t.pkgs[len(t.pkgs)-1])); err == nil {
		c.progress("%-24s cached (%s)", t.name+" "+v, dir)
		return dir, nil
	}
	tmp := dir + ".partial"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	args := []string{"build", "-trimpath", "-ldflags", t.ldflags(v), "-o", tmp + "/"}
	if t.tags != "" {
		args = append(args, "-tags", t.tags)
	}
	for _, p := range t.pkgs {
		args = append(args, t.importPath(p))
	}
	label := fmt.Sprintf("building %s %s (%s)", t.name, v, t.coldHint)
	if err := c.goBuild(ctx, label, filepath.Join(c.Source, "e2e", "tools", t.name), "build-"+t.name, t.cgo, args); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil { // a build of fewer packages
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// goBuild runs the go command in dir with progress every 30 s. Binaries are
// static unless cgo is asked for (the libvirt bindings need it).
func (c *Cluster) goBuild(ctx context.Context, label, dir, logName string, cgo bool, args []string, env ...string) error {
	start := time.Now()
	c.progress("%s ...", label)
	logPath := c.LogFile(logName)
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if cgo {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%s failed: %w; see %s", label, err, logPath)
			}
			c.progress("%s done in %s", label, since(start))
			return nil
		case <-tick.C:
			c.progress("%s ... %s", label, since(start))
		}
	}
}

// buildAll builds or finds every binary and links the user-facing ones into bin/.
func (c *Cluster) buildAll(ctx context.Context) (binaries, error) {
	var b binaries
	dirs := make([]string, len(toolBuilds))
	for i, t := range toolBuilds {
		d, err := c.buildTool(ctx, t)
		if err != nil {
			return b, err
		}
		dirs[i] = d
	}
	b.kube, b.tekton, b.tkn, b.etcd = dirs[0], dirs[1], filepath.Join(dirs[2], "tkn"), filepath.Join(dirs[3], "server")
	b.coredns = filepath.Join(dirs[4], "coredns")
	b.multus = dirs[5]
	b.netpol = filepath.Join(dirs[6], "cmd")
	b.csi = dirs[7]
	b.flannel = filepath.Join(dirs[8], "flannel")
	b.konn = dirs[9]
	b.tekvirt = c.path("cache", "tekvirt")
	args := []string{"build", "-trimpath", "-o", b.tekvirt + "/", "./cmd/tekvirt", "./e2e/cmd/tekvirt-testbed", "./cmd/tekvirt-operator", "./cmd/tekvirt-controller", "./cmd/tekvirt-step", "./cmd/tekvirt-pause", "./cmd/tekvirt-hostpath", "./cmd/tekvirt-downloads", "./cmd/tekvirt-router", "./e2e/cmd/tekvirt-netpol-queue", "./e2e/cmd/tekvirt-probe"}
	if err := c.goBuild(ctx, "building tekvirt", c.Source, "build-tekvirt", false, args); err != nil {
		return b, err
	}
	// The CLI users download, for each platform the downloads server offers.
	for _, arch := range ClientArchs {
		args := []string{"build", "-trimpath", "-o", b.client(arch), "./cmd/tekvirt"}
		if err := c.goBuild(ctx, "building the tekvirt CLI for linux/"+arch, c.Source, "build-tekvirt-"+arch, false, args, "GOOS=linux", "GOARCH="+arch); err != nil {
			return b, err
		}
	}
	// The node runtime links libvirt; it runs on the host, not in images.
	args = []string{"build", "-trimpath", "-o", b.tekvirt + "/", "./cmd/tekvirt-handler", "./cmd/tekvirt-launcher"}
	if err := c.goBuild(ctx, "building the tekvirt node runtime", c.Source, "build-tekvirt-runtime", true, args); err != nil {
		return b, err
	}
	links := map[string]string{
		"kubectl": b.k("kubectl"),
		"tkn":     b.tkn,
		"tekvirt": filepath.Join(b.tekvirt, "tekvirt"),
	}
	for name, target := range links {
		link := filepath.Join(c.BinDir(), name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return b, err
		}
	}
	return b, nil
}

// knownBinaries returns binary paths without building, for Down and Status.
func (c *Cluster) knownBinaries() binaries {
	b := binaries{tekvirt: c.path("cache", "tekvirt")}
	dirs := make([]string, len(toolBuilds))
	for i, t := range toolBuilds {
		dirs[i] = c.knownToolDir(t)
	}
	b.kube, b.tekton, b.tkn, b.etcd = dirs[0], dirs[1], filepath.Join(dirs[2], "tkn"), filepath.Join(dirs[3], "server")
	b.coredns = filepath.Join(dirs[4], "coredns")
	b.multus = dirs[5]
	b.netpol = filepath.Join(dirs[6], "cmd")
	b.csi = dirs[7]
	b.flannel = filepath.Join(dirs[8], "flannel")
	b.konn = dirs[9]
	return b
}

// knownToolDir is where t's binaries are once built.
func (c *Cluster) knownToolDir(t toolBuild) string {
	m, _ := c.toolModule(t)
	return c.toolDir(t, m.version)
}
