package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestHostedDataPlane: a hosted cluster made as a user makes one
// (`tekvirt create cluster kubevirt --node-pool-replicas 2`) runs what users
// deploy. Each worker's node address is its launcher Pod's (the bridge
// binding), different for each; a Pod pulls its image from the registry
// the infrastructure's Pods pull from; a Pod on one worker reaches a Pod
// on the other by address over TCP and UDP (flannel's VXLAN between the
// workers; a DNS query for UDP); a ClusterIP Service and a NodePort Service lead to it
// (kube-proxy on each worker), and its name and kubernetes.default resolve
// (the cluster DNS). Then the ways in from the infrastructure
// (checkWaysIn): a LoadBalancer Service and the default ingress. Last, a
// worker replaced (checkWorkerReplaced).
func TestHostedDataPlane(t *testing.T) {
	heavy(t, "9 minutes on 2 cores")
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	const name = "dp"
	cpNS := ns + "-" + name
	start := time.Now()
	createTwoWorkers(t, f, ns, name, workerMemory, "1")
	t.Logf("create -> NodePool Ready with 2 nodes: %s", time.Since(start).Round(time.Second))
	hosted := hostedClient(t, f, ns, name)
	workers := poolWorkers(t, c, cpNS, name)

	// Each node's address is its launcher Pod's.
	seen := map[string]string{}
	for _, w := range workers {
		vmi := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: w}, vmi); err != nil {
			t.Fatal(err)
		}
		podIP := f.LauncherPod(t, vmi).Status.PodIP
		framework.Eventually(t, time.Minute, "node "+w+" at its launcher Pod's address", func() error {
			n, err := hosted.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := nodeAddress(n, corev1.NodeInternalIP); got != podIP {
				return fmt.Errorf("InternalIP %q, launcher Pod %s", got, podIP)
			}
			return nil
		})
		if other, dup := seen[podIP]; dup {
			t.Errorf("workers %s and %s share the address %s", other, w, podIP)
		}
		seen[podIP] = w
	}

	// A server on the first worker, its image pulled from the registry by
	// its cluster address; a UDP server there too: a DNS server (the
	// cluster DNS's image, named as the release names it) answering one
	// name.
	image := strings.Replace(registryImage(t, f, "tekvirt/busybox"), cluster.RegistryAddr, cluster.RegistryClusterAddr, 1)
	// Its port is a hostPort of the first worker too (the portmap plugin).
	serverPod := shellPod("server", workers[0], image, map[string]string{"app": "web"},
		"mkdir -p /www && echo from-"+workers[0]+" > /www/index.html && exec httpd -f -p 8080 -h /www")
	serverPod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 18080, Protocol: corev1.ProtocolTCP}}
	server := hostedPod(t, hosted, serverPod)
	udp := udpServer(t, hosted, workers[0])
	svc, err := hosted.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := hosted.CoreV1().Nodes().Get(ctx, workers[1], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := hosted.CoreV1().Nodes().Get(ctx, workers[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "from-" + workers[0]
	// From the second worker: by address (TCP, then UDP), by the
	// Service's ClusterIP, by the NodePort on the second worker's address,
	// by the hostPort on the first's.
	// HTTP by nc: busybox's wget crashes on the workers' emulated CPU.
	script := fmt.Sprintf(`get() { for i in $(seq 30); do b=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 "$2" "$3" | tail -n 1) && [ -n "$b" ] && { echo "$1 $b"; return; }; sleep 1; done; echo "$1 unreachable"; }
get pod %[1]s 8080
nslookup udp.test %[5]s | sed 's/^/udp /'
get clusterip %[2]s 80
get nodeport %[3]s %[4]d
get dns web.default 80
get hostport %[6]s 18080
nslookup kubernetes.default.svc.cluster.local | sed 's/^/lookup /'
`, server.Status.PodIP, svc.Spec.ClusterIP, nodeAddress(other, corev1.NodeInternalIP), svc.Spec.Ports[0].NodePort, udp.Status.PodIP, nodeAddress(first, corev1.NodeInternalIP))
	framework.Eventually(t, 3*time.Minute, "the hosted cluster DNS available", func() error {
		d, err := hosted.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("available %d of %d", d.Status.AvailableReplicas, d.Status.Replicas)
		}
		return nil
	})
	clientPod := hostedPod(t, hosted, shellPod("client", workers[1], image, nil, script))
	logs := waitHostedPodDone(t, hosted, clientPod.Name, 2*time.Minute)
	for _, way := range []string{"pod", "clusterip", "nodeport", "dns", "hostport"} {
		if !strings.Contains(logs, way+" "+want) {
			t.Errorf("from worker %s %s: want %q\n%s", workers[1], way, want, logs)
		}
	}
	kube, err := hosted.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "lookup Address: "+kube.Spec.ClusterIP) && !strings.Contains(logs, "lookup Address 1: "+kube.Spec.ClusterIP) {
		t.Errorf("kubernetes.default does not resolve to %s:\n%s", kube.Spec.ClusterIP, logs)
	}
	if !strings.Contains(logs, "udp Address: 192.0.2.53") && !strings.Contains(logs, "udp Address 1: 192.0.2.53") {
		t.Errorf("from worker %s, no DNS answer over UDP from the Pod on %s:\n%s", workers[1], workers[0], logs)
	}
	t.Logf("create -> Pods of two workers reached each other: %s", time.Since(start).Round(time.Second))
	checkAPIServerReachesIn(t, hosted, server.Name, want)
	lbAddr := checkWaysIn(t, f, hosted, ns, name, cpNS, want)
	checkWorkerReplaced(t, f, hosted, cpNS, workers[0], workers[1], image, lbAddr)
}

// workerMemory is the memory of the workers of the scenarios that run
// Pods: a worker keeps its programs (initramfs), images and Pod volumes
// in memory, and each one runs the Konnectivity agent besides what the
// scenario deploys; at 1Gi a worker with the cluster DNS and the router
// ran out of memory.
const workerMemory = "1536Mi"

// createWorkers makes hosted cluster ns/name as a user does, `tekvirt
// create cluster kubevirt` with replicas 1-core workers of memory and a
// root volume of rootGiB (and any more flags); the cluster goes when t
// ends, unless t failed. waitPool waits for them to be Ready nodes.
func createWorkers(t *testing.T, f *framework.Framework, ns, name string, replicas int, memory, rootGiB string, flags ...string) {
	t.Helper()
	out, err := run(f, f.Bin("tekvirt"), append([]string{"create", "cluster", "kubevirt", "--name", name, "--namespace", ns,
		"--pull-secret", pullSecretFile(t), "--node-pool-replicas", fmt.Sprint(replicas), "--memory", memory, "--cores", "1",
		"--root-volume-size", rootGiB, "--root-volume-cache-strategy", "PVC"}, flags...)...)
	destroyUnlessFailed(t, f, ns, name)
	if err != nil {
		t.Fatalf("tekvirt create cluster kubevirt: %v\n%s", err, out)
	}
}

// createTwoWorkers is createWorkers of two, waiting for both Ready.
func createTwoWorkers(t *testing.T, f *framework.Framework, ns, name, memory, rootGiB string) {
	t.Helper()
	createWorkers(t, f, ns, name, 2, memory, rootGiB)
	waitPool(t, f.VMClient(t), &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 2, 15*time.Minute)
}

// destroyUnlessFailed destroys hosted cluster ns/name when t ends, unless
// it failed (then the cluster is kept to look at).
func destroyUnlessFailed(t *testing.T, f *framework.Framework, ns, name string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping hosted cluster %s/%s of the failed test", ns, name)
			return
		}
		if out, err := run(f, f.Bin("tekvirt"), "destroy", "cluster", "kubevirt", "--name", name, "--namespace", ns); err != nil {
			t.Logf("cleanup: %v\n%s", err, out)
		}
	})
}

// hostedClient is a client of hosted cluster ns/name as its admin.
func hostedClient(t *testing.T, f *framework.Framework, ns, name string) kubernetes.Interface {
	t.Helper()
	kc, err := f.Kube.CoreV1().Secrets(ns).Get(context.Background(), name+"-admin-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

func nodeAddress(n *corev1.Node, kind corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == kind {
			return a.Address
		}
	}
	return ""
}

// shellPod is default/name running script in image on node, once.
func shellPod(name, node, image string, labels map[string]string, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "c", Image: image, Command: []string{"sh", "-c", script}}}},
	}
}

// hostedPod creates pod in the hosted cluster and waits for it to run; it
// returns the Pod as it runs.
func hostedPod(t *testing.T, hosted kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := hosted.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *corev1.Pod
	// Patient: a worker busy starting the cluster's own Pods (its CPU
	// emulated, its host loaded by two highly available control planes)
	// took more than 3 minutes to start a Pod's sandbox.
	framework.Eventually(t, 5*time.Minute, "hosted Pod "+pod.Name+" running on "+pod.Spec.NodeName, func() error {
		var err error
		if p, err = hosted.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodPending || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s: %v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	return p
}

// waitHostedPodDone waits for default/name to end and returns its log.
func waitHostedPodDone(t *testing.T, hosted kubernetes.Interface, name string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	framework.Eventually(t, timeout, "hosted Pod "+name+" done", func() error {
		p, err := hosted.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Contains([]corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}, p.Status.Phase) {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	b, err := hosted.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// udpServer runs, on node, a DNS server (the hosted cluster DNS's image)
// that answers udp.test (and every name under it) with 192.0.2.53 and logs
// each query, and returns its Pod.
func udpServer(t *testing.T, hosted kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	dns, err := hosted.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "udp-test"}, Data: map[string]string{"Corefile": `.:53 {
    log
    template IN A udp.test {
        answer "{{ .Name }} 60 IN A 192.0.2.53"
    }
}
`}}
	if _, err := hosted.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "udp", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: node,
			SecurityContext: &corev1.PodSecurityContext{
				Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "53"}},
			},
			Containers: []corev1.Container{{
				Name: "dns", Image: dns.Spec.Template.Spec.Containers[0].Image, Args: []string{"-conf", "/etc/coredns/Corefile"},
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/coredns"}},
			}},
			Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}},
		},
	}
	return hostedPod(t, hosted, pod)
}

// checkAPIServerReachesIn: the hosted API server, which runs in the
// infrastructure cluster, reaches the hosted cluster's Pods and Services
// through the Konnectivity tunnel the workers' agents hold (the Pod logs
// read above went the same way, to the kubelet): pods/proxy and
// services/proxy, as `kubectl proxy` users and Kubernetes' conformance
// Proxy tests use them.
func checkAPIServerReachesIn(t *testing.T, hosted kubernetes.Interface, serverPod, want string) {
	t.Helper()
	ctx := context.Background()
	framework.Eventually(t, 2*time.Minute, "the hosted API server proxying to Pod "+serverPod+" and Service web", func() error {
		for what, req := range map[string]interface {
			DoRaw(context.Context) ([]byte, error)
		}{
			"pods/proxy":     hosted.CoreV1().Pods("default").ProxyGet("http", serverPod, "8080", "/", nil),
			"services/proxy": hosted.CoreV1().Services("default").ProxyGet("http", "web", "80", "/", nil),
		} {
			b, err := req.DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("%s: %q, want %q", what, b, want)
			}
		}
		return nil
	})
}
