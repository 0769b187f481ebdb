package guest

import (
	_ "embed"
)

//go:embed worker-init.sh
var workerInit []byte

// PauseImage is the name the worker's pause image is imported under.
const PauseImage = "tekvirt.io/pause:latest"

// cniTemplatePath is containerd's template of the CNI configuration: once
// the kubelet passes it the Node's spec.podCIDR (which the hosted
// controller manager allocates), containerd writes the configuration into
// conf_dir, and the node's network is ready. Each worker's Pods so get
// addresses of its own range, as kubenet gave them.
const cniTemplatePath = "etc/containerd/cni.conflist.tmpl"

// cniTemplate is read with containerd's cniConfigTemplate: PodCIDRRanges
// are the node's ranges, Routes their default routes. Pods of different
// workers reach each other through flannel's VXLAN (routes to each other
// node's range over flannel.1); init sets the MTU to the overlay's (the
// node's less VXLAN's 50 bytes) before the kubelet starts.
const cniTemplate = `{"cniVersion": "0.4.0", "name": "pods", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "mtu": 1450,
   "ipam": {"type": "host-local",
    "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}}, {{end}}[{"subnet": "{{$r}}"}]{{end}}],
    "routes": [{{range $i, $r := .Routes}}{{if $i}}, {{end}}{"dst": "{{$r}}"}{{end}}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}, "backend": "nftables"},
  {"type": "loopback"}]}
`

// workerFiles configure containerd (CRI, the overlayfs snapshotter on a
// tmpfs, so that containers of one image share its unpacked layers; the
// CNI bridge), the CNI bridge (pods of one node
// reach each other and, through the guest, the outside) and the kubelet
// (cgroupfs on cgroup v2, client certificates rotated, webhook
// authentication and authorization; its resolver, for Pods of dnsPolicy
// Default and the cluster DNS's upstream, the nameservers of the worker's
// DHCP lease without its search domains, which are the infrastructure's).
var workerFiles = map[string][]byte{
	"etc/passwd":   []byte("root:x:0:0:root:/root:/bin/sh\n"),
	"etc/group":    []byte("root:x:0:\n"),
	"etc/shells":   []byte("/bin/sh\n"),
	"etc/hostname": []byte("tekvirt-worker\n"),
	// containerd copies it into every Pod sandbox.
	"etc/hosts": []byte("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"),
	"etc/os-release": []byte("PRETTY_NAME=\"tekvirt hosted-cluster worker (Debian kernel, containerd, kubelet)\"\nNAME=\"tekvirt worker\"\n" +
		"ID=tekvirt-worker\nID_LIKE=debian\nVERSION_ID=1\n"),
	"etc/containerd/config.toml": []byte(`version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    # The root is the initramfs, which pivot_root cannot leave.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        NoPivotRoot = true
  [plugins."io.containerd.grpc.v1.cri".registry]
    # The user-data writes the hosts of plain-HTTP registries here.
    config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
    conf_template = "/` + cniTemplatePath + `"
`),
	cniTemplatePath: []byte(cniTemplate),
	"etc/kubernetes/kubelet.yaml": []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
rotateCertificates: true
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: Webhook}
evictionHard: {memory.available: 20Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
resolvConf: /run/kubelet-resolv.conf
`),
	// kube-proxy runs as the node (the kubelet's rotated credentials), its
	// rules in nftables; traffic from the node's own pod range is local.
	"etc/kubernetes/kube-proxy.yaml": []byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: /var/lib/kubelet/kubeconfig}
mode: nftables
detectLocalMode: NodeCIDR
`),
}

// Node are the node programs a worker runs besides containerd: the
// kubelet and kube-proxy (the testbed's Kubernetes build), flanneld, and
// the pause image (an image tarball).
type Node struct {
	Kubelet, KubeProxy, Flanneld, PauseTar string
	// Portmap is the CNI portmap plugin (hostPort), built with its
	// nftables backend: Debian's drives iptables, which workers lack.
	Portmap string
}

// nftModules are what kube-proxy's and flannel's nftables rules use.
var nftModules = []string{
	"nf_tables", "nft_ct", "nft_nat", "nft_chain_nat", "nft_masq", "nft_numgen", "nft_limit", "nft_redir",
	"nft_reject_inet", "nft_reject_ipv4", "nft_reject_ipv6", "nft_fib_inet", "nft_fib_ipv4", "nft_fib_ipv6",
	"nf_nat", "nf_conntrack_netlink",
}

// Worker is a hosted-cluster worker: the test guest's agent and dropbear,
// plus containerd, runc, the CNI plugins, nft, and n's programs.
func Worker(n Node) Flavor {
	return Flavor{
		Name: "worker",
		Packages: append(append([]string{}, Test.Packages...),
			"containerd", "runc", "libseccomp2", "containernetworking-plugins", "nftables", "libnftables1"),
		Modules: append(append(append([]string{}, Test.Modules...),
			"overlay", "bridge", "veth", "br_netfilter", "nf_conntrack", "vxlan"), nftModules...),
		Files:   workerFiles,
		Init:    workerInit,
		Inittab: inittab,
		Programs: append(append([]string{}, Test.Programs...),
			"usr/bin/containerd", "usr/bin/containerd-shim-runc-v2", "usr/bin/ctr", "usr/sbin/runc",
			"usr/lib/cni/bridge", "usr/lib/cni/host-local", "usr/lib/cni/loopback", "usr/sbin/nft"),
		Static: map[string]StaticFile{
			"usr/bin/kubelet":      {Source: n.Kubelet, Mode: 0o755},
			"usr/bin/kube-proxy":   {Source: n.KubeProxy, Mode: 0o755},
			"usr/bin/flanneld":     {Source: n.Flanneld, Mode: 0o755},
			"usr/lib/cni/portmap":  {Source: n.Portmap, Mode: 0o755},
			"opt/images/pause.tar": {Source: n.PauseTar, Mode: 0o644},
		},
	}
}
