package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// bigBytes is the file each throughput run downloads from the server's
// httpd; HTTP/1.0, so the server closes when it is all sent.
const bigBytes = 128 << 20

// requests is how many sequential HTTP requests time the latency.
const requests = 20

// serveScript is the server Pod's: httpd with a small page and the big
// file.
var serveScript = fmt.Sprintf(`mkdir -p /tmp/w && echo ok > /tmp/w/index.html && head -c %d /dev/zero > /tmp/w/big && httpd -f -p 8081 -h /tmp/w`, bigBytes)

// netScript downloads the big file, counting what arrived, between two
// readings of the CPU counters, and makes requests sequential HTTP/1.0
// requests for the page, each part timed by busybox time.
func netScript(server string) string {
	return fmt.Sprintf(`head -n 1 /proc/stat
time sh -c 'printf "GET /big HTTP/1.0\r\n\r\n" | nc %[1]s 8081 | wc -c' 2>&1
head -n 1 /proc/stat
time sh -c 'for i in $(seq %[2]d); do printf "GET / HTTP/1.0\r\n\r\n" | nc %[1]s 8081 > /dev/null; done' 2>&1`, server, requests)
}

var (
	realTime = regexp.MustCompile(`real\s+(\d+)m\s*([\d.]+)s`)
	received = regexp.MustCompile(`(?m)^\s*(\d+)\s*$`)
	cpuTimes = regexp.MustCompile(`(?m)^cpu\s+([\d ]+)$`)
)

// busy is the share of CPU time not idle between netScript's two readings
// of /proc/stat (user nice system idle iowait ...): of the guest's CPUs
// in a guest.
func busy(t *testing.T, who, out string) float64 {
	t.Helper()
	m := cpuTimes.FindAllStringSubmatch(out, -1)
	if len(m) != 2 {
		t.Fatalf("%s: no two CPU readings in %q", who, out)
	}
	sum := func(line string) (total, idle float64) {
		for i, f := range strings.Fields(line) {
			v, _ := strconv.ParseFloat(f, 64)
			total += v
			if i == 3 || i == 4 { // idle, iowait
				idle += v
			}
		}
		return total, idle
	}
	t0, i0 := sum(m[0][1])
	t1, i1 := sum(m[1][1])
	if t1 <= t0 {
		return 0
	}
	return 1 - (i1-i0)/(t1-t0)
}

// netFigures reads netScript's two times: MiB/s of the download (which
// must have brought the whole file) and the mean request latency.
func netFigures(t *testing.T, who, out string) (float64, time.Duration) {
	t.Helper()
	m := realTime.FindAllStringSubmatch(out, -1)
	if len(m) != 2 {
		t.Fatalf("%s: no two times in %q", who, out)
	}
	if n := received.FindStringSubmatch(out); n == nil {
		t.Fatalf("%s: no byte count in %q", who, out)
	} else if got, _ := strconv.Atoi(n[1]); got < bigBytes {
		t.Fatalf("%s: received %d bytes of the %d the server sends: %q", who, got, bigBytes, out)
	}
	secs := func(s []string) float64 {
		min, _ := strconv.ParseFloat(s[1], 64)
		sec, _ := strconv.ParseFloat(s[2], 64)
		return min*60 + sec
	}
	transfer, reqs := secs(m[0]), secs(m[1])
	if transfer <= 0 {
		transfer = 0.01 // busybox time's resolution
	}
	return float64(bigBytes) / (1 << 20) / transfer, time.Duration(reqs / requests * float64(time.Second))
}

// TestNetworkThroughput: TCP throughput (a download) and request latency
// against a Pod on the other node, from a guest on the tap masquerade
// binding, from the same guest on QEMU's user-mode network (a bare domain
// on this node, the binding tekvirt had before), and from a Pod on this
// node; ratios in one run. The guests are TCG: their CPU bounds them, and
// the test reports how busy it was.
func TestNetworkThroughput(t *testing.T) {
	f := benchOnly(t)
	nodes := f.Nodes(t)
	if len(nodes) < 2 {
		t.Skip("needs two nodes")
	}
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	image := shellImage(t, f)
	server := runPod(t, f, ns, "server", nodes[1], image, serveScript)
	ip := server.Status.PodIP

	// Pod -> Pod, this node to the other.
	podOut := transfer(t, func(script string) string {
		return podLogsWhenDone(t, f.Kube, ns, runPod(t, f, ns, "client", nodes[0], image, script).Name)
	}, ip)
	podRate, podLat := netFigures(t, "Pod", podOut)

	// The guest on the tap (masquerade), on this node.
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tap"}, Spec: framework.GuestVMI(framework.GuestImage, "tap")}
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: nodes[0]}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi = framework.WaitVMI(t, c, ns, vmi.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	tapAgent, _ := directAgent(t, vmi)
	tapOut := guestRun(t, tapAgent, netScript(ip))
	tapRate, tapLat := netFigures(t, "tap guest", tapOut)

	// The same guest on QEMU's user-mode network, a bare domain.
	userAgent := userModeDomain(t, f)
	userOut := guestRun(t, userAgent, netScript(ip))
	userRate, userLat := netFigures(t, "user-mode guest", userOut)

	t.Logf("from a Pod on the other node, %d MiB then %d requests:", bigBytes>>20, requests)
	t.Logf("  Pod:                 %7.1f MiB/s, %s per request", podRate, podLat)
	t.Logf("  guest, tap:          %7.1f MiB/s, %s per request; guest CPU %.0f%% busy downloading", tapRate, tapLat, 100*busy(t, "tap guest", tapOut))
	t.Logf("  guest, user-mode:    %7.1f MiB/s, %s per request; guest CPU %.0f%% busy downloading", userRate, userLat, 100*busy(t, "user-mode guest", userOut))
	t.Logf("tap/user-mode %.1fx throughput (goal >= 5x), %.2fx latency; tap/Pod %.2fx throughput (goal >= 0.5x, TCG-bound), %.1fx latency",
		tapRate/userRate, float64(tapLat)/float64(userLat), tapRate/podRate, float64(tapLat)/float64(podLat))
}

// runPod starts a Pod running script on node and returns it Running.
func runPod(t *testing.T, f *framework.Framework, ns, name, node, image, script string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: image, Command: []string{"sh", "-c", script}}}},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "Pod "+name+" running", func() error {
		got, err := f.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodRunning || got.Status.PodIP == "" {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		p = got
		return nil
	})
	return p
}

// guestRun runs script in a guest through its agent and returns its output.
func guestRun(t *testing.T, a *agent.Client, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := a.Exec(ctx, "/bin/sh", []string{"-c", script}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout) + string(res.Stderr)
}

// userModeDomain boots the guest as a bare domain on this node's libvirtd
// with QEMU's user-mode network (slirp: the guest at 10.0.2.15 behind
// QEMU's own NAT) and returns its agent once it has an address.
func userModeDomain(t *testing.T, f *framework.Framework) *agent.Client {
	t.Helper()
	dir := filepath.Join(cluster.NodeRoot, "bench", "usermode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if out, err := exec.Command("chown", "libvirt-qemu", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "usermode",
		UID: types.UID("6f1d2c3b-0000-4000-8000-0000000005e1")}, Spec: framework.GuestVMI(framework.GuestImage, "usermode")}
	opts := framework.GuestFiles(t, vmi, dir)
	opts.Interfaces = map[string]domain.Interface{domain.DefaultInterface: {Tap: "unused", MAC: "52:54:00:be:4c:99"}}
	d, err := domain.Convert(vmi, opts)
	if err != nil {
		t.Fatal(err)
	}
	nic := &d.Devices.Interfaces[0]
	nic.Source, nic.Target = &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}}, nil
	xml, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := libvirt.NewConnect(libvirtURI(f))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Close() })
	dom, err := conn.DomainCreateXML(xml, 0)
	if err != nil {
		t.Fatalf("the user-mode domain: %v", err)
	}
	t.Cleanup(func() { _ = dom.Destroy(); _ = dom.Free() })
	a := agent.New(libvirtAgent{dom})
	framework.Eventually(t, 3*time.Minute, "the user-mode guest's address", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := a.Exec(ctx, "/bin/sh", []string{"-c", "ip -4 addr show eth0"}, 100*time.Millisecond)
		if err != nil || !strings.Contains(string(res.Stdout), "inet 10.0.2.15") {
			return fmt.Errorf("%s: %w", res.Stdout, err)
		}
		return nil
	})
	return a
}
