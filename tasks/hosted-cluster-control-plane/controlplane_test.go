package hostedclustercontrolplane

import (
	"net"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
)

func TestFirstServiceIP(t *testing.T) {
	for cidr, want := range map[string]string{"172.31.0.0/16": "172.31.0.1", "10.96.5.7/12": "10.96.0.1", "fd00::/108": "fd00::1"} {
		ip, err := FirstServiceIP(cidr)
		if err != nil || ip.String() != want {
			t.Errorf("%s: %v %v, want %s", cidr, ip, err, want)
		}
	}
	if _, err := FirstServiceIP("nope"); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}

func TestServingRequestNamesEveryAddress(t *testing.T) {
	r := ServingRequest("clusters-demo", []net.IP{net.ParseIP("10.96.0.50"), net.ParseIP("172.31.0.1")})
	for _, n := range []string{"kube-apiserver", "kube-apiserver.clusters-demo.svc", "kubernetes.default.svc.cluster.local", "localhost"} {
		if !slices.Contains(r.DNSNames, n) {
			t.Errorf("no SAN %s in %v", n, r.DNSNames)
		}
	}
	var ips []string
	for _, ip := range r.IPs {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, []string{"10.96.0.50", "172.31.0.1", "127.0.0.1"}) {
		t.Errorf("IP SANs %v", ips)
	}
}

func TestTokenFile(t *testing.T) {
	if got := string(TokenFile("abcde-fghij")); got != "abcde-fghij,kubeadmin,kubeadmin,\"system:masters\"\n" {
		t.Errorf("token file %q", got)
	}
}

func TestAPIServerArgs(t *testing.T) {
	d := APIServer(Cluster{Namespace: "ns", Image: "img", Replicas: 1, ServiceCIDR: "172.31.0.0/16", ClusterCIDR: "10.132.0.0/14",
		AdvertiseIP: "10.96.0.50", EtcdEndpoint: "https://10.96.0.9:2379", Hash: "h"})
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Command, " ")
	for _, want := range []string{"--etcd-servers=https://10.96.0.9:2379", "--advertise-address=10.96.0.50", "--token-auth-file=", "--authorization-mode=Node,RBAC", "--enable-bootstrap-token-auth=true"} {
		if !strings.Contains(args, want) {
			t.Errorf("kube-apiserver lacks %s: %s", want, args)
		}
	}
	if strings.Contains(args, "anonymous-auth=true") || strings.Contains(args, "AlwaysAllow") {
		t.Errorf("kube-apiserver is open: %s", args)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, item := range v.Secret.Items {
			if item.Key == "ca.key" {
				t.Error("the API server mounts the CA's key")
			}
		}
	}
	if d.Spec.Template.Annotations[ConfigHashAnnotation] != "h" {
		t.Error("no config hash on the Pod template")
	}
}

// TestAPIServerEgressThroughKonnectivity: the API server dials into the
// hosted cluster through the proxy server beside it, over a socket both
// containers mount, and the proxy server takes only agents of the
// konnectivity CA.
func TestAPIServerEgressThroughKonnectivity(t *testing.T) {
	d := APIServer(Cluster{Namespace: "ns", Image: "img", Replicas: 3, ServiceCIDR: "172.31.0.0/16", ClusterCIDR: "10.132.0.0/14",
		AdvertiseIP: "10.96.0.50", EtcdEndpoint: "https://10.96.0.9:2379", Hash: "h"})
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 2 || spec.Containers[1].Name != konnectivityContainer {
		t.Fatalf("containers %v", spec.Containers)
	}
	api, proxy := spec.Containers[0], spec.Containers[1]
	if !slices.Contains(api.Command, "--egress-selector-config-file="+konnectivityDir+EgressSelectorKey) {
		t.Errorf("kube-apiserver has no egress selector: %v", api.Command)
	}
	if !strings.Contains(EgressSelector, "name: cluster") || !strings.Contains(EgressSelector, "udsName: "+konnectivitySocket) {
		t.Errorf("egress selector:\n%s", EgressSelector)
	}
	proxyArgs := strings.Join(proxy.Command, " ")
	for _, want := range []string{"--uds-name=" + konnectivitySocket, "--server-port=0", "--agent-port=8091", "--server-count=3",
		"--cluster-ca-cert=", "--proxy-strategies=destHost,default"} {
		if !strings.Contains(proxyArgs, want) {
			t.Errorf("proxy-server lacks %s: %s", want, proxyArgs)
		}
	}
	mountDir := func(c corev1.Container, vol string) string {
		for _, m := range c.VolumeMounts {
			if m.Name == vol {
				return m.MountPath
			}
		}
		return ""
	}
	if a, p := mountDir(api, "konnectivity-socket"), mountDir(proxy, "konnectivity-socket"); a == "" || a != p || !strings.HasPrefix(konnectivitySocket, a+"/") {
		t.Errorf("socket mounted at %q and %q, socket %s", a, p, konnectivitySocket)
	}
	names := map[string]bool{}
	for _, v := range spec.Volumes {
		if names[v.Name] {
			t.Errorf("volume %s twice", v.Name)
		}
		names[v.Name] = true
		if v.Secret == nil {
			continue
		}
		for _, item := range v.Secret.Items {
			if v.Secret.SecretName == hc.PKISecret && strings.HasSuffix(item.Key, ".key") && item.Key != hc.Key(hc.ServiceAccountKey) &&
				item.Key != hc.Key(hc.EtcdClient) && item.Key != hc.Key(hc.KubeletClient) {
				t.Errorf("the API server's Pod mounts %s", item.Key)
			}
		}
	}
}

func TestKonnectivityServingRequest(t *testing.T) {
	r := KonnectivityServingRequest("clusters-demo", net.ParseIP("10.96.0.77"))
	if !slices.Contains(r.DNSNames, "konnectivity-server.clusters-demo.svc") || len(r.IPs) != 1 || !r.IPs[0].Equal(net.ParseIP("10.96.0.77")) {
		t.Errorf("request %v %v", r.DNSNames, r.IPs)
	}
}

// TestControlPlaneMeetsRestricted: the control plane's Pods pass Pod
// Security Admission's own "restricted" checks, so that a control-plane
// namespace may enforce it.
func TestControlPlaneMeetsRestricted(t *testing.T) {
	cl := Cluster{Namespace: "ns", Image: "img", Replicas: 3, ServiceCIDR: "172.31.0.0/16", ClusterCIDR: "10.132.0.0/14", AdvertiseIP: "172.31.0.1", EtcdEndpoint: "https://etcd:2379"}
	for _, d := range []*appsv1.Deployment{APIServer(cl), ControllerManager(cl), Scheduler(cl)} {
		tmpl := d.Spec.Template
		if v, err := podsecurity.Violations(&tmpl.ObjectMeta, &tmpl.Spec); err != nil || len(v) > 0 {
			t.Errorf("%s violates restricted: %v %v", d.Name, v, err)
		}
	}
}
