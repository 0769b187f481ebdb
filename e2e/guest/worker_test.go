package guest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"
)

func TestWorkerFlavor(t *testing.T) {
	dir := t.TempDir()
	kubelet, pause := filepath.Join(dir, "kubelet"), filepath.Join(dir, "pause.tar")
	proxy, flanneld, portmap := filepath.Join(dir, "kube-proxy"), filepath.Join(dir, "flanneld"), filepath.Join(dir, "portmap")
	for _, f := range []string{kubelet, pause, proxy, flanneld, portmap} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := Worker(Node{Kubelet: kubelet, KubeProxy: proxy, Flanneld: flanneld, Portmap: portmap, PauseTar: pause})
	for _, p := range []string{"containerd", "runc", "containernetworking-plugins", "qemu-guest-agent", "nftables"} {
		if !slices.Contains(w.Packages, p) {
			t.Errorf("worker lacks package %s", p)
		}
	}
	for _, m := range []string{"bridge", "veth", "virtio_net", "vxlan", "nf_tables", "nft_numgen"} {
		if !slices.Contains(w.Modules, m) {
			t.Errorf("worker lacks module %s", m)
		}
	}
	if len(Test.Packages) != 4 || slices.Contains(Test.Modules, "bridge") {
		t.Error("building the worker changed the test guest")
	}
	if w.Static["usr/bin/kubelet"].Source != kubelet || !bytes.Contains(w.Init, []byte("--bootstrap-kubeconfig")) {
		t.Error("the worker does not start the kubelet given")
	}
	if w.Static["usr/bin/kube-proxy"].Source != proxy || w.Static["usr/bin/flanneld"].Source != flanneld ||
		!bytes.Contains(w.Init, []byte("/usr/bin/kube-proxy --config=/etc/kubernetes/kube-proxy.yaml")) || !bytes.Contains(w.Init, []byte("/usr/bin/flanneld --kubeconfig-file")) {
		t.Error("the worker does not run the kube-proxy and flanneld given")
	}
	if w.Static["usr/lib/cni/portmap"].Source != portmap || !strings.Contains(string(w.Files[cniTemplatePath]), `"type": "portmap", "capabilities": {"portMappings": true}, "backend": "nftables"`) {
		t.Error("the worker's pods get no hostPort: the portmap plugin given, with nftables, in the CNI chain")
	}
	if !bytes.Contains(w.Init, []byte("/etc/"+cniTemplatePath[len("etc/"):])) {
		t.Error("init does not set the pods' MTU in the CNI template")
	}
	a, err := w.key("linux-image-6.1.0-1-amd64")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Test.key("linux-image-6.1.0-1-amd64"); bytes.Equal(a, b) {
		t.Error("worker and test guest share a cache key")
	}
	// A relinked but identical kubelet keeps the worker; a new one does not.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(kubelet, later, later); err != nil {
		t.Fatal(err)
	}
	if b, _ := w.key("linux-image-6.1.0-1-amd64"); !bytes.Equal(a, b) {
		t.Error("touching the kubelet changed the worker's cache key")
	}
	if err := os.WriteFile(kubelet, []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := w.key("linux-image-6.1.0-1-amd64"); bytes.Equal(a, b) {
		t.Error("a new kubelet kept the worker's cache key")
	}
}

func TestDiskSize(t *testing.T) {
	for payload, want := range map[int64]int64{10 << 20: 64, 87 << 20: 103, 200 << 20: 228} {
		if got := diskSize(payload); got != want {
			t.Errorf("diskSize(%d MiB) = %d MiB, want %d", payload>>20, got, want)
		}
	}
}

// TestCNITemplate renders the worker's CNI template with the data
// containerd gives it (its cniConfigTemplate) and checks that the result is
// the bridge configuration for the node's own ranges.
func TestCNITemplate(t *testing.T) {
	if !strings.Contains(string(workerFiles["etc/containerd/config.toml"]), `conf_template = "/`+cniTemplatePath+`"`) {
		t.Errorf("containerd's configuration does not name the template %s", cniTemplatePath)
	}
	tmpl, err := template.New("cni").Parse(string(workerFiles[cniTemplatePath]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ranges, routes, subnets []string
	}{
		{[]string{"10.132.1.0/24"}, []string{"0.0.0.0/0"}, []string{"10.132.1.0/24"}},
		{[]string{"10.132.2.0/24", "fd00:1::/64"}, []string{"0.0.0.0/0", "::/0"}, []string{"10.132.2.0/24", "fd00:1::/64"}},
	} {
		var out bytes.Buffer
		data := struct {
			PodCIDR       string
			PodCIDRRanges []string
			Routes        []string
		}{tc.ranges[0], tc.ranges, tc.routes}
		if err := tmpl.Execute(&out, data); err != nil {
			t.Fatal(err)
		}
		var conf struct {
			Plugins []struct {
				Type string
				IPAM struct {
					Ranges [][]struct{ Subnet string }
					Routes []struct{ Dst string }
				}
			}
		}
		if err := json.Unmarshal(out.Bytes(), &conf); err != nil {
			t.Fatalf("ranges %v: not JSON: %v\n%s", tc.ranges, err, out.String())
		}
		var subnets, routes []string
		for _, r := range conf.Plugins[0].IPAM.Ranges {
			subnets = append(subnets, r[0].Subnet)
		}
		for _, r := range conf.Plugins[0].IPAM.Routes {
			routes = append(routes, r.Dst)
		}
		if conf.Plugins[0].Type != "bridge" || !slices.Equal(subnets, tc.subnets) || !slices.Equal(routes, tc.routes) {
			t.Errorf("ranges %v: got %s subnets %v routes %v", tc.ranges, conf.Plugins[0].Type, subnets, routes)
		}
	}
}
