package cluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// clientCerts are the client identities of the control plane and node, with
// the kubeconfig each one gets under etc/.
var clientCerts = []certRequest{
	{file: "admin", cn: "tekvirt-admin", orgs: []string{"system:masters"}},
	{file: "controller-manager", cn: "system:kube-controller-manager"},
	{file: "scheduler", cn: "system:kube-scheduler"},
	{file: "kube-proxy", cn: "system:kube-proxy"},
	{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
}

// writePKI issues the control plane's and every node's certificates.
func (c *Cluster) writePKI() error {
	ca, err := loadOrCreateCA(c.pkiDir(), "ca")
	if err != nil {
		return fmt.Errorf("certificate authority: %w", err)
	}
	reqs := append([]certRequest{}, clientCerts...)
	reqs = append(reqs,
		certRequest{file: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", c.NodeName},
			ips: []net.IP{net.ParseIP(kubernetesSvcIP).To4(), net.IPv4(127, 0, 0, 1), c.NodeIP}},
	)
	for _, n := range c.nodes() {
		reqs = append(reqs,
			certRequest{file: n.proc("kubelet"), cn: "system:node:" + n.name, orgs: []string{"system:nodes"}},
			certRequest{file: n.proc("kubelet-serving"), cn: n.name, dns: []string{n.name}, ips: []net.IP{n.ip, net.IPv4(127, 0, 0, 1)}, server: true})
	}
	for _, r := range reqs {
		if err := ca.issue(c.pkiDir(), r); err != nil {
			return err
		}
	}
	// The kube-apiserver proxies aggregated APIs with a client certificate
	// from its own CA, which the aggregated servers trust for that only.
	frontProxy, err := loadOrCreateCA(c.pkiDir(), "front-proxy-ca")
	if err != nil {
		return fmt.Errorf("front proxy certificate authority: %w", err)
	}
	if err := frontProxy.issue(c.pkiDir(), certRequest{file: "front-proxy-client", cn: frontProxyClient}); err != nil {
		return err
	}
	if err := ensureServiceAccountKey(c.pkiDir()); err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	return nil
}

// writeConfigs creates the PKI, kubeconfigs and component config files. It
// keeps existing keys so running components and users' kubeconfigs stay valid.
func (c *Cluster) writeConfigs() error {
	if err := c.writePKI(); err != nil {
		return err
	}
	local := fmt.Sprintf("https://127.0.0.1:%d", APIServerPort)
	for _, name := range []string{"controller-manager", "scheduler"} {
		if err := c.writeKubeconfig(c.path("etc", name+".kubeconfig"), name, local); err != nil {
			return err
		}
	}
	if err := c.writeKubeconfig(c.Kubeconfig(), "admin", local); err != nil {
		return err
	}
	files := map[string]string{
		c.path("etc", "libvirtd.conf"):  c.libvirtdConfig(),
		c.path("etc", "admission.yaml"): admissionConfig,
	}
	if err := checkCNIConfDir(CNIConfDir); err != nil {
		return err
	}
	for _, n := range c.nodes() {
		if err := c.writeNodeConfigs(n, files); err != nil {
			return err
		}
		if err := seedCNIBin(n); err != nil {
			return err
		}
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeIfChanged(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeNodeConfigs writes n's kubeconfigs and adds its component
// configuration files to files. An extra node reaches the API server at the
// first node's address, through its own network namespace.
func (c *Cluster) writeNodeConfigs(n node, files map[string]string) error {
	server := fmt.Sprintf("https://127.0.0.1:%d", APIServerPort)
	if !n.first() {
		server = fmt.Sprintf("https://%s", net.JoinHostPort(c.NodeIP.String(), strconv.Itoa(APIServerPort)))
	}
	for name, cert := range map[string]string{"kubelet": n.proc("kubelet"), "kube-proxy": "kube-proxy"} {
		path := c.etc(n, name+".kubeconfig")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := c.writeKubeconfig(path, cert, server); err != nil {
			return err
		}
	}
	files[c.etc(n, "kubelet.yaml")] = c.kubeletConfig(n)
	files[c.etc(n, "kube-proxy.yaml")] = c.kubeProxyConfig(n)
	files[c.etc(n, "containerd.toml")] = c.containerdConfig(n)
	files[nodePath(n, filepath.Join(CNIConfDir, cniConfigFile))] = cniConfig(n)
	return nil
}

// admissionConfig makes every namespace enforce Pod Security "baseline"
// unless it says otherwise, as a cluster shared by tenants should: a user
// with edit in a namespace cannot run a Pod with the node's files, its
// namespaces or privileges (launcher Pods and task Pods meet baseline).
const admissionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: PodSecurity
    configuration:
      apiVersion: pod-security.admission.config.k8s.io/v1
      kind: PodSecurityConfiguration
      defaults:
        enforce: baseline
        enforce-version: latest
        warn: baseline
        warn-version: latest
      exemptions:
        namespaces: [kube-system]
`

// frontProxyClient is the name of the kube-apiserver's front proxy client
// certificate, the one name aggregated API servers accept.
const frontProxyClient = "front-proxy-client"

// writeIfChanged leaves an identical file alone: kube-proxy exits when its
// configuration file changes, even to the same content.
func writeIfChanged(path string, content []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (c *Cluster) kubeletConfig(n node) string {
	extra := ""
	if root := cgroupRoot(n); root != "" {
		extra = "cgroupRoot: " + root + "\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]s/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[2]s
tlsCertFile: %[1]s/%[3]s.crt
tlsPrivateKeyFile: %[1]s/%[3]s.key
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDomain: cluster.local
clusterDNS: [%[5]s]
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 95
maxPods: 250
%[4]s`, c.pkiDir(), c.containerdSocketOf(n), n.proc("kubelet-serving"), extra, clusterDNSIP)
}

func (c *Cluster) kubeProxyConfig(n node) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {maxPerCore: 0}
nodePortAddresses: [primary]
`, c.etc(n, "kube-proxy.kubeconfig"), podCIDR+","+podCIDR6, n.name)
}

// containerdConfig is the CRI configuration known to work here: cgroupfs,
// restrict_oom_score_adj (no CAP_SYS_RESOURCE), and the local registry as a
// plain-HTTP mirror of itself and of its cluster address (on an extra
// node, its loopback forwards to the registry on the host's). Devices a container gets from a device
// plugin belong to its user (this machine has no udev to make
// /dev/net/tun 0666, so the launcher's QEMU could not open it otherwise).
func (c *Cluster) containerdConfig(n node) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[4]s/tekvirt/tekvirt-pause:latest"
  restrict_oom_score_adj = true
  disable_apparmor = true
  device_ownership_from_security_context = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[6]q
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."%[4]s"]
    endpoint = ["http://%[4]s"]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."%[7]s"]
    endpoint = ["http://%[4]s"]
`, filepath.Join(c.dataDir(n), "containerd"), filepath.Join(c.runDir(n), "containerd", "state"), c.containerdSocketOf(n),
		RegistryAddr, CNIBinDir, CNIConfDir, RegistryClusterAddr)
}

// cniConfig bridges n's pods on the node's own subnet. They reach Pods on
// other nodes at their own addresses; traffic off the Pod network leaves
// with the node's (installPodEgress), not with the plugin's ipMasq, which
// would hide Pods from those on other nodes.
func cniConfig(n node) string {
	return `{
  "cniVersion": "1.0.0",
  "name": "tekvirt",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "tekvirt0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + n.podSubnet() + `"}], [{"subnet": "` + n.podSubnet6() + `"}]],
               "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`
}

// LibvirtSocket is the libvirtd socket the node runtime connects to.
func (c *Cluster) LibvirtSocket() string { return c.path("run", "libvirt", "libvirt-sock") }

// LibvirtURI connects to the cluster's libvirtd.
func (c *Cluster) LibvirtURI() string { return "qemu:///system?socket=" + c.LibvirtSocket() }

func (c *Cluster) libvirtdConfig() string {
	return fmt.Sprintf("unix_sock_dir = %q\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\nunix_sock_group = \"root\"\n",
		filepath.Dir(c.LibvirtSocket()))
}

// prepareHost sets the kernel switches pods and Services need and the user
// and folders libvirt's QEMU driver expects where no init system made them.
func (c *Cluster) prepareHost() error {
	for _, m := range []string{"br_netfilter", "overlay"} {
		// Built-in or already loaded on some kernels; the sysctls below tell.
		_ = exec.Command("modprobe", m).Run()
	}
	sysctls := map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/ipv6/conf/all/forwarding":        "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	}
	for k, v := range sysctls {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil && !strings.HasPrefix(k, "net/bridge/") {
			return fmt.Errorf("enabling %s: %w", strings.ReplaceAll(k, "/", "."), err)
		}
	}
	if err := ensureNodeBridge(); err != nil {
		return fmt.Errorf("the node bridge %s (the first node's IPv6 address): %w", nodeBridge, err)
	}
	if err := exec.Command("id", "libvirt-qemu").Run(); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "libvirt-qemu").CombinedOutput(); err != nil {
			return fmt.Errorf("creating the libvirt-qemu user: %w: %s", err, out)
		}
	}
	if err := c.migratePodBridge(); err != nil {
		return err
	}
	if err := installPodEgress(""); err != nil {
		return fmt.Errorf("the first node's Pod egress: %w", err)
	}
	if err := c.ensureStorage(); err != nil {
		return fmt.Errorf("storage pool: %w", err)
	}
	if err := shareKVM(); err != nil {
		return err
	}
	for _, d := range []string{"/var/log/libvirt/qemu", "/var/lib/libvirt/qemu", "/var/cache/libvirt/qemu", "/run/libvirt", filepath.Dir(c.LibvirtSocket()), c.path("run", "containerd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// migratePodBridge drops the address a cluster made before nodes had their
// own pod subnets gave the first node's bridge (the whole pod network): it
// would route the other nodes' pods into this one.
func (c *Cluster) migratePodBridge() error {
	old := "10.244.0.1/16"
	out, err := exec.Command("ip", "-o", "-4", "addr", "show", "dev", "tekvirt0").Output()
	if err != nil || !strings.Contains(string(out), " "+old+" ") {
		return nil
	}
	for _, p := range c.processes(c.knownBinaries()) {
		if p.name == "containerd" && c.pid(p) != 0 {
			return fmt.Errorf("the pod bridge tekvirt0 still has %s, from before nodes had their own pod subnets, and pods use it: run `tekvirt down`, then up again", old)
		}
	}
	return run("ip", "addr", "del", old, "dev", "tekvirt0")
}

// shareKVM gives /dev/kvm the group and mode Debian's udev rules give it
// (kvm, 0660) and puts libvirt-qemu in that group. libvirt checks KVM as the
// QEMU user: when it may not open /dev/kvm it deems its cached QEMU
// capabilities stale and probes QEMU again on every domain start (~40 s).
func shareKVM() error {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return nil
	}
	if exec.Command("getent", "group", "kvm").Run() != nil {
		if out, err := exec.Command("groupadd", "--system", "kvm").CombinedOutput(); err != nil {
			return fmt.Errorf("creating group kvm: %w: %s", err, out)
		}
	}
	for _, args := range [][]string{{"chgrp", "kvm", "/dev/kvm"}, {"chmod", "0660", "/dev/kvm"}, {"usermod", "-a", "-G", "kvm", "libvirt-qemu"}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
