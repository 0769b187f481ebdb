package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestHostedPodThroughput: Pod-to-Pod TCP throughput and request latency
// between the two workers of a hosted cluster (flannel's VXLAN between
// the workers' launcher Pods, the workers TCG guests) against two Pods of
// the infrastructure on the same two nodes, in one run; then how long a
// hosted LoadBalancer Service takes from created to answering on its
// address from this host.
func TestHostedPodThroughput(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	ns := f.Namespace(t)
	c := f.VMClient(t)
	b := &hostedBench{t: t, f: f, c: c, ns: ns, cp: ns + "-net"}
	pullSecret := filepath.Join(t.TempDir(), "pull-secret.json")
	if err := os.WriteFile(pullSecret, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b.tekvirt("create", "cluster", "kubevirt", "--name", "net", "--namespace", ns, "--pull-secret", pullSecret,
		"--node-pool-replicas", "2", "--memory", "1Gi", "--cores", "1", "--root-volume-size", "1",
		"--root-volume-cache-strategy", "PVC", "--control-plane-availability-policy", "SingleReplica")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("keeping hosted cluster %s/net of the failed run", ns)
			return
		}
		b.tekvirt("destroy", "cluster", "kubevirt", "--name", "net", "--namespace", ns)
	})
	framework.Eventually(t, 15*time.Minute, "2 hosted nodes Ready", func() error {
		if err := b.connect("net"); err != nil {
			return err
		}
		if n := b.readyNodes(names(b.workers("net"))); n != 2 {
			return fmt.Errorf("%d Ready", n)
		}
		return nil
	})
	workers := names(b.workers("net"))
	var infraNodes []string
	for _, w := range workers {
		vmi := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: b.cp, Name: w}, vmi); err != nil {
			t.Fatal(err)
		}
		infraNodes = append(infraNodes, vmi.Status.NodeName)
	}
	image := shellImage(t, f)

	// Two Pods of the infrastructure on the workers' nodes.
	server := runPod(t, f, ns, "server", infraNodes[0], image, serveScript)
	infraOut := transfer(t, func(script string) string {
		p := runPod(t, f, ns, "client", infraNodes[1], image, script)
		return podLogsWhenDone(t, f.Kube, ns, p.Name)
	}, server.Status.PodIP)
	infraRate, infraLat := netFigures(t, "infrastructure Pod", infraOut)

	// Two Pods of the hosted cluster, one on each worker.
	hostedImage := strings.Replace(image, cluster.RegistryAddr, cluster.RegistryClusterAddr, 1)
	hs := hostedRunPod(t, b.hosted, "server", workers[0], hostedImage, map[string]string{"app": "server"}, serveScript)
	hostedOut := transfer(t, func(script string) string {
		p := hostedRunPod(t, b.hosted, "client", workers[1], hostedImage, nil, script)
		return podLogsWhenDone(t, b.hosted, "default", p.Name)
	}, hs.Status.PodIP)
	hostedRate, hostedLat := netFigures(t, "hosted Pod", hostedOut)

	t.Logf("Pod to Pod on the workers' infrastructure nodes (%s -> %s), %d MiB then %d requests:", infraNodes[1], infraNodes[0], bigBytes>>20, requests)
	t.Logf("  infrastructure Pods: %7.1f MiB/s, %s per request", infraRate, infraLat)
	t.Logf("  hosted Pods:         %7.1f MiB/s, %s per request; worker CPU %.0f%% busy downloading", hostedRate, hostedLat, 100*busy(t, "hosted Pod", hostedOut))
	t.Logf("hosted/infrastructure %.2fx throughput, %.1fx latency", hostedRate/infraRate, float64(hostedLat)/float64(infraLat))

	// A hosted LoadBalancer Service: created -> answering from this host.
	created := time.Now()
	if _, err := b.hosted.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "server"},
			Ports: []corev1.ServicePort{{Port: 8081, TargetPort: intstr.FromInt32(8081), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A fresh connection each try: one made before this host's kube-proxy
	// serves the new address goes elsewhere (on these machines, to the
	// sandbox's egress proxy, which answers 404) and, kept alive, would
	// carry every later try there too.
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	framework.Eventually(t, 2*time.Minute, "the hosted LoadBalancer Service answering", func() error {
		s, err := b.hosted.CoreV1().Services("default").Get(ctx, "lb", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet (%w)", err)
		}
		url := "http://" + net.JoinHostPort(s.Status.LoadBalancer.Ingress[0].IP, "8081") + "/"
		resp, err := httpc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "ok") {
			return fmt.Errorf("%s: %s: %q", url, resp.Status, body)
		}
		return nil
	})
	t.Logf("hosted LoadBalancer Service created -> answering from the host: %s", time.Since(created).Round(100*time.Millisecond))
}

// transfer runs netScript against server (once its httpd answers) with
// run, which returns the output.
func transfer(t *testing.T, run func(script string) string, server string) string {
	t.Helper()
	wait := fmt.Sprintf(`until printf "GET / HTTP/1.0\r\n\r\n" | nc %s 8081 | grep -q ok; do sleep 1; done; `, server)
	return run(wait + netScript(server) + "; echo done; sleep 300") // kept running: runPod waits for Running
}

// podLogsWhenDone waits for ns/name to end and returns its log.
func podLogsWhenDone(t *testing.T, kube kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	var out string
	framework.Eventually(t, 5*time.Minute, "Pod "+name+"'s transfer", func() error {
		b, err := kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		out = string(b)
		if err != nil || !strings.Contains(out, "done") {
			return fmt.Errorf("logs %q: %w", out, err)
		}
		return nil
	})
	return out
}

// hostedRunPod starts default/name running script on the hosted node and
// returns it Running.
func hostedRunPod(t *testing.T, hosted kubernetes.Interface, name, node, image string, labels map[string]string, script string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: image, Command: []string{"sh", "-c", script}}}},
	}
	if _, err := hosted.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "hosted Pod "+name+" running", func() error {
		got, err := hosted.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase == corev1.PodPending || got.Status.PodIP == "" {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		p = got
		return nil
	})
	return p
}
