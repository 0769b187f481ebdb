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
// are the node's ranges, Routes their default routes.
const cniTemplate = `{"cniVersion": "0.4.0", "name": "pods", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local",
    "ranges": [{{range $i, $r := .PodCIDRRanges}}{{if $i}}, {{end}}[{"subnet": "{{$r}}"}]{{end}}],
    "routes": [{{range $i, $r := .Routes}}{{if $i}}, {{end}}{"dst": "{{$r}}"}{{end}}]}},
  {"type": "loopback"}]}
`

// workerFiles configure containerd (CRI, the native snapshotter on the
// initramfs's tmpfs, the CNI bridge), the CNI bridge (pods of one node
// reach each other and, through the guest, the outside) and the kubelet
// (cgroupfs on cgroup v2, client certificates rotated, webhook
// authentication and authorization).
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
    snapshotter = "native"
    # The root is the initramfs, which pivot_root cannot leave.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        NoPivotRoot = true
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
resolvConf: ""
`),
}

// Worker is a hosted-cluster worker: the test guest's agent and dropbear,
// plus containerd, runc, the CNI plugins, the kubelet binary given (the
// testbed's build) and the pause image (an image tarball).
func Worker(kubelet, pauseTar string) Flavor {
	return Flavor{
		Name: "worker",
		Packages: append(append([]string{}, Test.Packages...),
			"containerd", "runc", "libseccomp2", "containernetworking-plugins"),
		Modules: append(append([]string{}, Test.Modules...),
			"overlay", "bridge", "veth", "br_netfilter", "nf_conntrack"),
		Files:   workerFiles,
		Init:    workerInit,
		Inittab: inittab,
		Programs: append(append([]string{}, Test.Programs...),
			"usr/bin/containerd", "usr/bin/containerd-shim-runc-v2", "usr/bin/ctr", "usr/sbin/runc",
			"usr/lib/cni/bridge", "usr/lib/cni/host-local", "usr/lib/cni/loopback", "usr/lib/cni/portmap"),
		Static: map[string]StaticFile{
			"usr/bin/kubelet":      {Source: kubelet, Mode: 0o755},
			"opt/images/pause.tar": {Source: pauseTar, Mode: 0o644},
		},
	}
}
