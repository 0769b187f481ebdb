package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestAttackGuestReachesNode: from a guest the node is no nearer than from
// any Pod on it. The guest and a Pod on the first node (whose network is
// this machine's) try the same node ports: a service listening on the
// node's loopback only, reached through the node's address; one on the
// node's address; the kubelet's; the handler's. Each answers the guest as
// it answers the Pod, the loopback service neither, and nothing answers on
// the guest's gateway (its launcher Pod, where nothing listens).
func TestAttackGuestReachesNode(t *testing.T) {
	t.Parallel() // mostly waiting on its VM: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	node, nodeIP := nodeName(t, f), f.NodeIP(t)

	var loopbackHits, nodeHits atomic.Int32
	listen := func(addr string, hits *atomic.Int32) int {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				conn.Close()
			}
		}()
		return l.Addr().(*net.TCPAddr).Port
	}
	loopback := listen("127.0.0.1:0", &loopbackHits)
	onNode := listen(net.JoinHostPort(nodeIP, "0"), &nodeHits)

	vm := framework.GuestVM(ns, "reach", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "runs with its agent", framework.AgentConnected)
	_, handlerPort, err := net.SplitHostPort(vmi.Annotations["tekvirt.io/handler-address"])
	if err != nil {
		t.Fatalf("handler address: %v", err)
	}
	targets := []struct{ name, addr string }{
		{"loopback-service", net.JoinHostPort(nodeIP, strconv.Itoa(loopback))},
		{"node-service", net.JoinHostPort(nodeIP, strconv.Itoa(onNode))},
		{"kubelet", net.JoinHostPort(nodeIP, "10250")},
		{"kubelet-healthz", net.JoinHostPort(nodeIP, "10248")},
		{"handler", net.JoinHostPort(nodeIP, handlerPort)},
	}
	var script strings.Builder
	script.WriteString("probe() { if nc -w 3 \"${2%:*}\" \"${2##*:}\" -e true >/dev/null 2>&1; then echo \"$1=open\"; else echo \"$1=closed\"; fi; }\n")
	for _, tg := range targets {
		fmt.Fprintf(&script, "probe %s %s\n", tg.name, tg.addr)
	}
	gateway := script.String()
	for _, port := range []string{strconv.Itoa(loopback), "10250", "10248", handlerPort} {
		gateway += fmt.Sprintf("probe gateway-%s 10.0.2.1:%s\n", port, port)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prober"},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: registryImage(t, f, "tekvirt/busybox"),
				Command: []string{"sh", "-c", script.String() + "echo probes done"},
			}},
		},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var fromPod string
	framework.Eventually(t, 2*time.Minute, "the Pod probed the node", func() error {
		b, _ := f.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if fromPod = string(b); !strings.Contains(fromPod, "probes done") {
			return fmt.Errorf("logs %q", fromPod)
		}
		return nil
	})
	fromGuest := guestShell(t, f, vmi, gateway)
	t.Logf("from the Pod:\n%sfrom the guest:\n%s", fromPod, fromGuest)
	for _, tg := range targets {
		podSaw, guestSaw := probeResult(fromPod, tg.name), probeResult(fromGuest, tg.name)
		if podSaw == "" || podSaw != guestSaw {
			t.Errorf("%s (%s): the Pod found it %q, the guest %q; want the same", tg.name, tg.addr, podSaw, guestSaw)
		}
	}
	if probeResult(fromGuest, "node-service") != "open" {
		t.Error("the guest did not reach the node's own address: the probe proves nothing")
	}
	if n := loopbackHits.Load(); n != 0 || probeResult(fromGuest, "loopback-service") != "closed" {
		t.Errorf("the node's loopback-only service took %d connections; the guest found it %q", n, probeResult(fromGuest, "loopback-service"))
	}
	for _, line := range strings.Split(fromGuest, "\n") {
		if strings.HasPrefix(line, "gateway-") && !strings.HasSuffix(line, "=closed") {
			t.Errorf("the guest's gateway (its launcher Pod) answered: %s", line)
		}
	}
}

// probeResult is "open" or "closed" as out says of name, or "".
func probeResult(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	return ""
}
