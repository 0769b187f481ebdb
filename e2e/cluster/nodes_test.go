package cluster

import (
	"net"
	"strings"
	"testing"
)

func TestExtraNodeLayout(t *testing.T) {
	c := &Cluster{Home: "/h", NodeName: "box", NodeIP: net.IPv4(192, 0, 2, 2)}
	first, second := c.firstNode(), c.extraNode(2)
	if second.name != "box-node2" || second.ip.String() != "10.245.0.2" || second.podSubnet() != "10.244.1.0/24" || first.podSubnet() != "10.244.0.0/24" {
		t.Fatalf("node 2 = %+v, subnet %s; node 1 subnet %s", second, second.podSubnet(), first.podSubnet())
	}
	for _, tc := range []struct{ got, want string }{
		{first.proc("kubelet"), "kubelet"},
		{second.proc("kubelet"), "node2-kubelet"},
		{c.etc(first, "kubelet.yaml"), "/h/etc/kubelet.yaml"},
		{c.etc(second, "kubelet.yaml"), "/h/etc/nodes/2/kubelet.yaml"},
		{c.containerdSocketOf(second), "/h/run/nodes/2/containerd/containerd.sock"},
		{cgroupRoot(first), ""},
		{cgroupRoot(second), "/tekvirt-node2"},
		{pathIn("/n/box-node2", "/var/lib/kubelet/pods/x"), "/n/box-node2/var/lib/kubelet/pods/x"},
		{pathIn("/n/box-node2", "/var/lib/tekvirt"), "/n/box-node2/var/lib/tekvirt"},
		{pathIn("/n/box-node2", "/var/lib/tekvirtx"), "/var/lib/tekvirtx"},
		{pathIn("/n/box-node2", "/etc/hosts"), "/etc/hosts"},
		{HostPath("box", "/var/lib/kubelet"), "/var/lib/kubelet"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	kubelet := c.kubeletConfig(second)
	for _, want := range []string{"cgroupRoot: /tekvirt-node2\n", "unix:///h/run/nodes/2/containerd/containerd.sock", "node2-kubelet-serving.crt"} {
		if !strings.Contains(kubelet, want) {
			t.Errorf("node 2's kubelet configuration lacks %q:\n%s", want, kubelet)
		}
	}
	if strings.Contains(c.kubeletConfig(first), "cgroupRoot") {
		t.Error("the first node's kubelet has a cgroup root of its own")
	}
	if cni := cniConfig(second); !strings.Contains(cni, `"subnet": "10.244.1.0/24"`) {
		t.Errorf("node 2's CNI configuration: %s", cni)
	}
	if cd := c.containerdConfig(second); !strings.Contains(cd, `conf_dir = "/etc/cni/net.d"`) || !strings.Contains(cd, `bin_dir = "/opt/cni/bin"`) || !strings.Contains(cd, `root = "/h/data/nodes/2/containerd"`) {
		t.Errorf("node 2's containerd configuration:\n%s", cd)
	}
}
