package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	hostedclusterbootstrap "github.com/tekvirt/tekvirt/tasks/hosted-cluster-bootstrap"
)

// apartSide is one of the two hosted clusters of TestHostedClustersApart.
type apartSide struct {
	name, cpNS, worker, workerIP string
	hosted                       kubernetes.Interface
	web, dns                     *corev1.Pod
	nodePort                     int32
}

// TestHostedClustersApart: two hosted clusters side by side, one worker
// each, with the same Pod network (the default 10.132.0.0/14, so their
// Pods' addresses overlap). Each one's traffic stays inside it: a Pod of
// each reaches its own cluster's server and never the other's. Then, from
// a Pod with hostNetwork on the first cluster's worker (what a hosted
// cluster's admin can run), the attacks of checkHostNetworkAttack.
func TestHostedClustersApart(t *testing.T) {
	heavy(t, "two hosted clusters of one worker each: 6-8 minutes")
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	sides := []*apartSide{{name: "apart-a"}, {name: "apart-b"}}
	for _, s := range sides {
		// One replica of each control-plane component: two highly
		// available control planes (twelve etcd and API server Pods) and
		// two emulated workers overload the two-core testbed until etcd
		// times out; isolation, not availability, is tried here.
		createWorkers(t, f, ns, s.name, 1, workerMemory, "1", "--control-plane-availability-policy", "SingleReplica")
	}
	image := strings.Replace(registryImage(t, f, "tekvirt/busybox"), cluster.RegistryAddr, cluster.RegistryClusterAddr, 1)
	for _, s := range sides {
		waitPool(t, c, &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name}}, 1, 15*time.Minute)
		s.cpNS = hc.ControlPlaneNamespace(ns, s.name)
		s.worker = poolWorkers(t, c, s.cpNS, s.name)[0]
		s.hosted = hostedClient(t, f, ns, s.name)
		n, err := s.hosted.CoreV1().Nodes().Get(ctx, s.worker, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.workerIP = nodeAddress(n, corev1.NodeInternalIP)
		s.web = hostedPod(t, s.hosted, shellPod("web", s.worker, image, map[string]string{"app": "web"},
			"mkdir -p /www && echo from-"+s.name+" > /www/index.html && exec httpd -f -p 8080 -h /www"))
		svc, err := s.hosted.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.nodePort = svc.Spec.Ports[0].NodePort
		s.dns = udpServer(t, s.hosted, s.worker)
	}
	a, b := sides[0], sides[1]
	t.Logf("web Pods: %s at %s, %s at %s (workers %s, %s)", a.name, a.web.Status.PodIP, b.name, b.web.Status.PodIP, a.workerIP, b.workerIP)

	// Each one's traffic stays inside it.
	for i, s := range sides {
		o := sides[1-i]
		script := fmt.Sprintf(`get() { b=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$2" 8080 | tail -n 1); echo "$1 ${b:-unreachable}"; }
get own %s
get other %s
`, s.web.Status.PodIP, o.web.Status.PodIP)
		client := hostedPod(t, s.hosted, shellPod("client", s.worker, image, nil, script))
		logs := waitHostedPodDone(t, s.hosted, client.Name, 2*time.Minute)
		if !strings.Contains(logs, "own from-"+s.name) {
			t.Errorf("%s: its own web Pod at %s not reached:\n%s", s.name, s.web.Status.PodIP, logs)
		}
		if strings.Contains(logs, "from-"+o.name) {
			t.Errorf("%s reached a Pod of %s:\n%s", s.name, o.name, logs)
		}
	}
	checkHostNetworkAttack(t, f, a, b)
}

// checkHostNetworkAttack: from a Pod with hostNetwork on cluster a's worker
// (the worker's own network: its launcher Pod's address on the
// infrastructure's Pod network), with the worker's files mounted:
//   - the infrastructure's API server answers as to system:anonymous, and
//     refuses every token the worker holds (its Pods' ServiceAccount
//     tokens are the hosted cluster's);
//   - an infrastructure node's kubelet refuses an anonymous client;
//   - cluster b's API server refuses an anonymous client, b's etcd (and
//     a's own) a client without its certificate;
//   - b's worker takes its node ports from anywhere (the load balancers'
//     way in; the probe's control) but neither its kubelet nor its pod
//     network's tunnel: a DNS query wrapped in VXLAN as b's own nodes wrap
//     it never reaches b's DNS Pod, while the same frame sent from b's own
//     worker does (the control);
//   - b's Konnectivity proxy server (the way b's API server reaches into
//     b) takes no agent without a certificate, nor with a's agents'
//     certificate (which a's admin reads from a's kube-system), while a's
//     own takes that certificate (the control).
func checkHostNetworkAttack(t *testing.T, f *framework.Framework, a, b *apartSide) {
	ctx := context.Background()
	stolen, err := a.hosted.CoreV1().Secrets("kube-system").Get(ctx, hc.KonnectivityAgent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.hosted.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: probeFilesSecret},
		Data: stolen.Data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agentCert := func(name, addr string) string {
		return fmt.Sprintf("tls-cert,%s,%s,%s/tls.crt,%s/tls.key", name, addr, probeFilesDir, probeFilesDir)
	}
	infraAPI := kubernetesEndpoint(t, f)
	service := func(s *apartSide, name string, port int) string {
		svc, err := f.Kube.CoreV1().Services(s.cpNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(port))
	}
	bNode, err := b.hosted.CoreV1().Nodes().Get(ctx, b.worker, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vtep struct {
		VNI     int    `json:"VNI"`
		VtepMAC string `json:"VtepMAC"`
	}
	if err := json.Unmarshal([]byte(bNode.Annotations["flannel.alpha.coreos.com/backend-data"]), &vtep); err != nil {
		t.Fatalf("node %s's flannel annotation: %v", b.worker, err)
	}
	tunnel := net.JoinHostPort(b.workerIP, strconv.Itoa(hostedclusterbootstrap.VXLANPort))
	inject := func(name, qname string) string {
		// From an address of the hosted Pod network no node of b has.
		return fmt.Sprintf("vxlan-dns,%s,%s,%d,%s,10.135.250.9,%s,%s", name, tunnel, vtep.VNI, vtep.VtepMAC, b.dns.Status.PodIP, qname)
	}
	out := hostNetworkProbe(t, f, a, "attack",
		"https,infra-api,https://"+infraAPI+"/api/v1/namespaces/"+a.cpNS+"/secrets",
		"tokens,worker-tokens,/host/var/lib/kubelet/pods,https://"+infraAPI+"/api/v1/namespaces/"+a.cpNS+"/secrets",
		"https,infra-kubelet,https://"+net.JoinHostPort(f.NodeIP(t), "10250")+"/pods",
		"https,other-api,https://"+service(b, hc.APIServerService, hc.APIServerPort)+"/api/v1/secrets",
		"https,other-etcd,https://"+service(b, hc.EtcdClientService, hc.EtcdClientPort)+"/version",
		"https,own-etcd,https://"+service(a, hc.EtcdClientService, hc.EtcdClientPort)+"/version",
		"tcp,other-kubelet,"+net.JoinHostPort(b.workerIP, "10250"),
		"tcp,other-nodeport,"+net.JoinHostPort(b.workerIP, strconv.Itoa(int(b.nodePort))),
		inject("other-tunnel", "attack.udp.test."),
		"https,other-konnectivity,https://"+service(b, hc.KonnectivityService, hc.KonnectivityAgentPort)+"/",
		agentCert("other-konnectivity-stolen", service(b, hc.KonnectivityService, hc.KonnectivityAgentPort)),
		agentCert("own-konnectivity", service(a, hc.KonnectivityService, hc.KonnectivityAgentPort)))
	control := hostNetworkProbe(t, f, b, "control", inject("own-tunnel", "control.udp.test."))
	t.Logf("from %s's worker:\n%sfrom %s's own worker:\n%s", a.name, out, b.name, control)

	anonymous := func(name string) {
		got := probeResult(out, name)
		refused := strings.HasPrefix(got, "401 ") || strings.HasPrefix(got, "403 ") && strings.Contains(got, "system:anonymous")
		if !refused {
			t.Errorf("%s: %q, want Unauthorized or Forbidden to system:anonymous", name, got)
		}
	}
	anonymous("infra-api")
	anonymous("infra-kubelet")
	anonymous("other-api")
	tokens := strings.Fields(probeResult(out, "worker-tokens"))
	if len(tokens) < 2 {
		t.Errorf("worker-tokens: %q: no token found on the worker, the probe proves nothing", probeResult(out, "worker-tokens"))
	}
	for _, status := range tokens[min(1, len(tokens)):] {
		if status != "401" {
			t.Errorf("a token from %s's worker got %s from the infrastructure's API server, want 401", a.name, status)
		}
	}
	for _, name := range []string{"other-etcd", "own-etcd"} {
		if got := probeResult(out, name); !strings.HasPrefix(got, "error ") || !strings.Contains(got, "certificate") {
			t.Errorf("%s: %q, want a TLS refusal for want of a client certificate", name, got)
		}
	}
	if got := probeResult(out, "other-konnectivity"); !strings.HasPrefix(got, "error ") || !strings.Contains(got, "certificate") {
		t.Errorf("other-konnectivity: %q, want a TLS refusal for want of a client certificate", got)
	}
	if got := probeResult(out, "other-konnectivity-stolen"); !strings.HasPrefix(got, "refused ") {
		t.Errorf("%s's Konnectivity proxy server took %s's agent certificate: %q", b.name, a.name, got)
	}
	if got := probeResult(out, "own-konnectivity"); got != "accepted" {
		t.Errorf("own-konnectivity: %q, want accepted (the control: %s's agents' certificate at its own proxy server)", got, a.name)
	}
	if got := probeResult(out, "other-kubelet"); got != "closed" {
		t.Errorf("%s's worker reached %s's kubelet: %s", a.name, b.name, got)
	}
	if got := probeResult(out, "other-nodeport"); got != "open" {
		t.Errorf("%s's node port %d from %s's worker: %s, want open (the control)", b.name, b.nodePort, a.name, got)
	}
	for name, probe := range map[string]string{"other-tunnel": out, "own-tunnel": control} {
		if got := probeResult(probe, name); got != "sent" {
			t.Errorf("%s: %q, want sent", name, got)
		}
	}
	var dnsLog string
	framework.Eventually(t, time.Minute, b.name+"'s DNS Pod got the query from its own worker", func() error {
		raw, err := b.hosted.CoreV1().Pods("default").GetLogs(b.dns.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if dnsLog = string(raw); !strings.Contains(dnsLog, "control.udp.test.") {
			return fmt.Errorf("log %q (%w)", dnsLog, err)
		}
		return nil
	})
	for _, line := range strings.Split(dnsLog, "\n") {
		if strings.Contains(line, "udp.test.") {
			t.Logf("%s's DNS Pod: %s", b.name, line)
		}
	}
	if strings.Contains(dnsLog, "attack.udp.test.") {
		t.Errorf("%s's worker injected a packet into %s's pod network:\n%s", a.name, b.name, dnsLog)
	}
}

// probeFilesSecret, when the hosted cluster's default namespace has it, is
// mounted into hostNetworkProbe's Pod at probeFilesDir: what an attacker
// brings.
const (
	probeFilesSecret = "probe-files"
	probeFilesDir    = "/probe-files"
)

// hostNetworkProbe runs tekvirt-probe with probes in a Pod with hostNetwork
// on s's worker, the worker's /var/lib/kubelet/pods mounted at
// /host/var/lib/kubelet/pods (and probeFilesSecret at probeFilesDir), and
// returns its output.
func hostNetworkProbe(t *testing.T, f *framework.Framework, s *apartSide, name string, probes ...string) string {
	t.Helper()
	image := strings.Replace(registryImage(t, f, "tekvirt/tekvirt-probe"), cluster.RegistryAddr, cluster.RegistryClusterAddr, 1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: s.worker, HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr(false),
			Containers: []corev1.Container{{Name: "probe", Image: image, Args: probes,
				VolumeMounts: []corev1.VolumeMount{{Name: "pods", MountPath: "/host/var/lib/kubelet/pods", ReadOnly: true},
					{Name: "files", MountPath: probeFilesDir, ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "pods", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/pods"}}},
				{Name: "files", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: probeFilesSecret, Optional: ptr(true)}}}},
		},
	}
	if _, err := s.hosted.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := waitHostedPodDone(t, s.hosted, name, 3*time.Minute)
	if !strings.Contains(out, "probes done") {
		t.Fatalf("probe %s on %s did not finish:\n%s", name, s.worker, out)
	}
	return out
}

// kubernetesEndpoint is the infrastructure API server's address as its
// "kubernetes" Service's EndpointSlice names it (host:port).
func kubernetesEndpoint(t *testing.T, f *framework.Framework) string {
	t.Helper()
	slices, err := f.Kube.DiscoveryV1().EndpointSlices("default").List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		if len(s.Endpoints) > 0 && len(s.Endpoints[0].Addresses) > 0 && len(s.Ports) > 0 && s.Ports[0].Port != nil {
			return net.JoinHostPort(s.Endpoints[0].Addresses[0], strconv.Itoa(int(*s.Ports[0].Port)))
		}
	}
	t.Fatal("the kubernetes Service has no endpoint")
	return ""
}
