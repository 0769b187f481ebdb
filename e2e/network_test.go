package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/podnet"
)

// guestShell runs a shell command in vmi's guest (through its launcher
// Pod's agent) and returns what it printed.
func guestShell(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance, script string) string {
	t.Helper()
	res, err := podLauncher(t, f, f.LauncherPod(t, vmi)).Exec(context.Background(), guestexec.Request{Command: "/bin/sh", Args: []string{"-c", script}, TimeoutSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout) + string(res.Stderr)
}

// droppedWhile runs script in vmi's guest and returns what it printed and
// how many packets the anti-spoofing rules in its launcher Pod dropped
// meanwhile: from another MAC, and from another address.
func droppedWhile(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance, script string) (out string, otherMAC, otherAddress uint64) {
	t.Helper()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", qemuOf(t, domain.Name(vmi))))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	mac0, addr0, err := podnet.Dropped(ns)
	if err != nil {
		t.Fatal(err)
	}
	out = guestShell(t, f, vmi, script)
	mac1, addr1, err := podnet.Dropped(ns)
	if err != nil {
		t.Fatal(err)
	}
	return out, mac1 - mac0, addr1 - addr0
}

// webClientPod starts Pod ns/client on node: busybox serving "from-a-pod"
// on port 8081 (its httpd log names who asked), then running script. It
// returns the Pod and a reader of its log.
func webClientPod(t *testing.T, f *framework.Framework, ns, node, script string) (*corev1.Pod, func() string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: registryImage(t, f, "tekvirt/busybox"),
				Command: []string{"sh", "-c", "mkdir -p /www && echo from-a-pod > /www/index.html && httpd -f -vv -p 8081 -h /www &\n" + script},
			}},
		},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod, func() string {
		b, _ := f.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		return string(b)
	}
}

// guestGet is a guest's shell script that prints the last line of the
// page httpd serves at addr:8088, or "unreachable" within timeout seconds.
func guestGet(addr string, timeout int) string {
	return fmt.Sprintf(`body=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w %d %s 8088 | tail -n 1); echo "${body:-unreachable}"`, timeout, addr)
}

// TestMasqueradePodNetwork: a guest on the pod network as KubeVirt's
// masquerade binding puts it: 10.0.2.2/24 with the gateway, DNS and MTU
// its launcher's DHCP server hands out; a Pod on the other node reaches it
// at its launcher Pod's address on every port when the interface lists
// none, and only on the listed ones when it lists some; and what the guest
// opens to a Pod comes from its launcher Pod's address; frames it sends
// as another MAC or address are dropped in the Pod.
func TestMasqueradePodNetwork(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	nodes := f.Nodes(t)
	if len(nodes) < 2 {
		t.Skip("needs two nodes")
	}
	onNode := map[string]string{"kubernetes.io/hostname": nodes[0]}
	every := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every"}, Spec: framework.GuestVMI(framework.GuestImage, "every")}
	listed := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "listed"}, Spec: framework.GuestVMI(framework.GuestImage, "listed")}
	listed.Spec.Domain.Devices.Interfaces[0].Ports = []v1.Port{{Name: "web", Port: 8080}}
	every.Labels = map[string]string{"app": "every"}
	// A Service to the guest by name: the cluster DNS resolves it in the
	// Pod and in the guest (its DHCP lease names the cluster's DNS server
	// and search domains).
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-web"},
		Spec:       corev1.ServiceSpec{Selector: every.Labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(9090)}}},
	}
	if _, err := f.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, vmi := range []*v1.VirtualMachineInstance{every, listed} {
		vmi.Spec.NodeSelector = onNode
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	serve := "mkdir -p /tmp/www && hostname > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && httpd -p 9090 -h /tmp/www && echo serving"
	podIPs := map[string]string{}
	for _, vmi := range []*v1.VirtualMachineInstance{every, listed} {
		got := framework.WaitVMI(t, c, ns, vmi.Name, 3*time.Minute, "runs", framework.AgentConnected)
		framework.WaitVMI(t, c, ns, vmi.Name, 30*time.Second, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
		*vmi = *got
		pod := f.LauncherPod(t, vmi)
		podIPs[vmi.Name] = pod.Status.PodIP
		out := guestShell(t, f, vmi, serve+"; ip -4 addr show eth0; ip route; cat /etc/resolv.conf; nslookup every-web")
		t.Logf("guest %s:\n%s", vmi.Name, out)
		for _, want := range []string{"serving", "inet 10.0.2.2/24", "default via 10.0.2.1", "search " + ns + ".svc.cluster.local", "nameserver 10.96.0.10", "every-web." + ns + ".svc.cluster.local"} {
			if !strings.Contains(out, want) {
				t.Errorf("guest %s: want %q in %q", vmi.Name, want, out)
			}
		}
		if ifs := vmi.Status.Interfaces; len(ifs) != 1 || ifs[0].IP != pod.Status.PodIP {
			t.Errorf("VMI %s interfaces %+v, want the Pod's address %s", vmi.Name, ifs, pod.Status.PodIP)
		}
	}

	// A Pod on the other node: it reaches the guests, and serves them.
	client, logs := webClientPod(t, f, ns, nodes[1], fmt.Sprintf(`get() { printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "${1%%:*}" "${1#*:}" 2>/dev/null | tail -n 1; }
for target in every=%s:8080 every-other=%s:9090 listed=%s:8080 listed-other=%s:9090 service=every-web:80; do
  body=$(get "${target#*=}")
  echo "$target: ${body:-unreachable}"
done
echo checks done; sleep 300`, podIPs["every"], podIPs["every"], podIPs["listed"], podIPs["listed"]))
	framework.Eventually(t, 2*time.Minute, "the Pod tried every guest port", func() error {
		if !strings.Contains(logs(), "checks done") {
			return fmt.Errorf("logs %q", logs())
		}
		return nil
	})
	out := logs()
	for _, want := range []string{"every=" + podIPs["every"] + ":8080: every", "every-other=" + podIPs["every"] + ":9090: every",
		"listed=" + podIPs["listed"] + ":8080: listed", "listed-other=" + podIPs["listed"] + ":9090: unreachable", "service=every-web:80: every"} {
		if !strings.Contains(out, want) {
			t.Errorf("from a Pod on %s: want %q in\n%s", nodes[1], want, out)
		}
	}
	pod, err := f.Kube.CoreV1().Pods(ns).Get(ctx, client.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=MissingClusterDNS"})
	if err != nil || len(events.Items) > 0 {
		t.Errorf("MissingClusterDNS events %v, %v: want none (the kubelets name the cluster DNS)", events, err)
	}
	got := guestShell(t, f, every, `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+pod.Status.PodIP+" 8081")
	if !strings.Contains(got, "from-a-pod") {
		t.Errorf("the guest did not reach the Pod at %s: %q", pod.Status.PodIP, got)
	}
	framework.Eventually(t, 30*time.Second, "the Pod saw the guest come from its launcher Pod's address", func() error {
		if !strings.Contains(logs(), podIPs["every"]) {
			return fmt.Errorf("no %s in the Pod's httpd log:\n%s", podIPs["every"], logs())
		}
		return nil
	})

	// Attack: the guest sends as another MAC, then from another address.
	// The anti-spoofing rules in its launcher Pod drop both, so the Pod's
	// server answers neither.
	get := `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 ` + pod.Status.PodIP + " 8081 | tail -n 1"
	got, macs, addrs := droppedWhile(t, f, every, "mac=$(cat /sys/class/net/eth0/address); ip link set eth0 address 52:54:00:66:66:66 && "+
		get+"; echo spoofed-mac; ip link set eth0 address $mac; "+
		"ip addr add 10.0.2.99/24 dev eth0 && ip route replace default via 10.0.2.1 src 10.0.2.99 && "+get+"; echo spoofed-address; "+
		"ip route replace default via 10.0.2.1 src 10.0.2.2; ip addr del 10.0.2.99/24 dev eth0")
	t.Logf("spoofing guest: %q; dropped from another MAC %d, from another address %d", got, macs, addrs)
	if strings.Contains(got, "from-a-pod") || !strings.Contains(got, "spoofed-address") || macs == 0 || addrs == 0 {
		t.Errorf("a guest sending as another MAC or address: answered %q, dropped %d and %d packets; want no answer and both dropped", got, macs, addrs)
	}
}

// TestBridgePodNetwork: a guest on the pod network as KubeVirt's bridge
// binding puts it: it takes its launcher Pod's address, gateway and MTU by
// DHCP, a Pod on the other node reaches it there on every port and sees
// its connections come from that address; port-forward reaches it through
// the bridge; frames it sends from another address are dropped in the Pod.
func TestBridgePodNetwork(t *testing.T) {
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	nodes := f.Nodes(t)
	if len(nodes) < 2 {
		t.Skip("needs two nodes")
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bridged"}, Spec: framework.GuestVMI(framework.GuestImage, "bridged")}
	vmi.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}
	vmi.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodes[0]}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi = framework.WaitVMI(t, c, ns, vmi.Name, 3*time.Minute, "runs", framework.AgentConnected)
	framework.WaitVMI(t, c, ns, vmi.Name, 30*time.Second, "not live-migratable for its bridge on the pod network",
		framework.LiveMigratable(corev1.ConditionFalse, v1.VirtualMachineInstanceReasonInterfaceNotMigratable, v1.AllowPodBridgeNetworkLiveMigrationAnnotation))
	launcherPod := f.LauncherPod(t, vmi)
	podIP := launcherPod.Status.PodIP
	out := guestShell(t, f, vmi, "mkdir -p /tmp/www && hostname > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && httpd -p 9090 -h /tmp/www && echo serving; ip -4 addr show eth0; ip route")
	t.Logf("guest:\n%s", out)
	gateway := podIP[:strings.LastIndex(podIP, ".")] + ".1" // the node's pod bridge
	for _, want := range []string{"serving", "inet " + podIP + "/24", "default via " + gateway, "169.254.75.10 dev eth0"} {
		if !strings.Contains(out, want) {
			t.Errorf("guest: want %q in %q", want, out)
		}
	}
	framework.Eventually(t, time.Minute, "the VMI reports the Pod's address", func() error {
		got := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
			return err
		}
		if ifs := got.Status.Interfaces; len(ifs) != 1 || ifs[0].IP != podIP || ifs[0].Name != "default" {
			return fmt.Errorf("interfaces %+v, want default at %s", ifs, podIP)
		}
		return nil
	})

	pod, logs := webClientPod(t, f, ns, nodes[1], fmt.Sprintf(`get() { printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "${1%%:*}" "${1#*:}" 2>/dev/null | tail -n 1; }
for target in %[1]s:8080 %[1]s:9090; do
  body=$(get "$target")
  echo "$target: ${body:-unreachable}"
done
echo checks done; sleep 300`, podIP))
	framework.Eventually(t, 2*time.Minute, "the Pod tried the guest's ports", func() error {
		if !strings.Contains(logs(), "checks done") {
			return fmt.Errorf("logs %q", logs())
		}
		return nil
	})
	for _, want := range []string{podIP + ":8080: bridged", podIP + ":9090: bridged"} {
		if !strings.Contains(logs(), want) {
			t.Errorf("from a Pod on %s: want %q in\n%s", nodes[1], want, logs())
		}
	}
	pod, err := f.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 ` + pod.Status.PodIP + " 8081 | tail -n 1"
	if got := guestShell(t, f, vmi, get); !strings.Contains(got, "from-a-pod") {
		t.Errorf("the guest did not reach the Pod at %s: %q", pod.Status.PodIP, got)
	}
	framework.Eventually(t, 30*time.Second, "the Pod saw the guest come from the Pod's address", func() error {
		if !strings.Contains(logs(), podIP) {
			return fmt.Errorf("no %s in the Pod's httpd log:\n%s", podIP, logs())
		}
		return nil
	})

	// port-forward: the launcher reaches the guest across the bridge.
	stream, err := portForwardStream(t, f, "", ns, "virtualmachineinstances", vmi.Name, "8080")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(stream, 4096))
	_ = stream.Close()
	if !strings.Contains(string(body), "bridged") {
		t.Errorf("port-forward to guest port 8080: %q", body)
	}

	// Attack: the guest sends from another address of the Pods' network.
	// The anti-spoofing rules in its launcher Pod drop it.
	spoofed := podIP[:strings.LastIndex(podIP, ".")] + ".250"
	got, _, addrs := droppedWhile(t, f, vmi, "ip addr add "+spoofed+"/24 dev eth0 && ip route replace default via "+gateway+" src "+spoofed+" && "+get+"; echo spoofed-address; "+
		"ip route replace default via "+gateway+" src "+podIP+"; ip addr del "+spoofed+"/24 dev eth0")
	t.Logf("spoofing guest: %q; dropped from another address %d", got, addrs)
	if strings.Contains(got, "from-a-pod") || !strings.Contains(got, "spoofed-address") || addrs == 0 {
		t.Errorf("a guest sending from %s: answered %q, dropped %d packets; want no answer and the packets dropped", spoofed, got, addrs)
	}
}
