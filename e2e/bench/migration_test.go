package bench

import (
	"context"
	"encoding/json"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// migrationRun is one migration's figures: the wall time of the whole
// operation, and QEMU's own elapsed time and downtime as libvirt reports
// them on the target (domjobinfo --completed).
type migrationRun struct {
	total             time.Duration
	elapsed, downtime time.Duration
}

// migrationRuns is how many migrations of each kind TestMigrationOverhead
// interleaves: on two cores emulating with TCG one migration's figures vary
// by a third from the next one's, so the medians take more runs than the
// other benches'.
const migrationRuns = 9

// TestMigrationOverhead compares a live migration of an idle 256Mi
// containerDisk guest between the two nodes by tekvirt (`virtctl migrate`
// semantics: a VirtualMachineInstanceMigration, created -> Succeeded: a
// target launcher Pod scheduled and prepared, the streams carried by the
// handlers over TLS) against `virsh migrate --live --copy-storage-all` of
// the same domain XML between two bare libvirtds on the same two nodes:
// the first node's, and one the bench starts in the second node's network
// and mount namespaces. Interleaved, median of migrationRuns each. Downtime is QEMU's
// (the guest's pause at switch-over), read the same way for both.
func TestMigrationOverhead(t *testing.T) {
	f := benchOnly(t)
	_, second := f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	target := startNodeLibvirtd(t, f, second)

	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mover"}, Spec: framework.GuestVMI(framework.GuestImage, "mover")}
	if err := c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vmi.Name, 3*time.Minute, "running", framework.AgentConnected)
	framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))

	var ours, bare []migrationRun
	for i := 0; i < migrationRuns; i++ {
		ours = append(ours, oursMigrate(t, f, c, ns, vmi.Name, i))
		bare = append(bare, virshMigrate(t, f, target, i))
	}
	report := func(name string, rs []migrationRun) (time.Duration, time.Duration) {
		var total, elapsed, down []time.Duration
		for _, r := range rs {
			total, elapsed, down = append(total, r.total), append(elapsed, r.elapsed), append(down, r.downtime)
		}
		t.Logf("%s: total median %s of %v; QEMU elapsed median %s; downtime median %s of %v", name, median(total), total, median(elapsed), median(down), down)
		return median(total), median(down)
	}
	bt, bd := report("bare virsh migrate --live --copy-storage-all", bare)
	ot, od := report("tekvirt VirtualMachineInstanceMigration", ours)
	t.Logf("total ratio %.2f (goal <= 1.3), downtime ratio %.2f (goal <= 1.5)", float64(ot)/float64(bt), float64(od)/float64(max(bd, time.Millisecond)))
}

// oursMigrate migrates VMI ns/name to the other node and returns the time
// from the migration's creation to Succeeded, with QEMU's figures from the
// target launcher's log.
func oursMigrate(t *testing.T, f *framework.Framework, c client.Client, ns, name string, i int) migrationRun {
	t.Helper()
	ctx := context.Background()
	m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bench-%d", i)},
		Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: name}}
	start := time.Now()
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	for m.Status.Phase != v1.MigrationSucceeded {
		if m.Status.Phase == v1.MigrationFailed || time.Since(start) > 5*time.Minute {
			t.Fatalf("migration %s: %s %+v", m.Name, m.Status.Phase, m.Status.MigrationState)
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
	}
	r := migrationRun{total: time.Since(start)}
	logs, err := f.Kube.CoreV1().Pods(ns).GetLogs(m.Status.MigrationState.TargetPod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`\{[^\n]*"incoming migration completed"[^\n]*\}`).Find(logs)
	var done struct {
		ElapsedMs  int64 `json:"elapsedMs"`
		DowntimeMs int64 `json:"downtimeMs"`
	}
	if line == nil || json.Unmarshal(line, &done) != nil {
		t.Fatalf("target launcher %s logged no completed migration:\n%s", m.Status.MigrationState.TargetPod, logs)
	}
	r.elapsed, r.downtime = time.Duration(done.ElapsedMs)*time.Millisecond, time.Duration(done.DowntimeMs)*time.Millisecond
	// The next migration waits for the VMI to be reported where it went.
	framework.WaitVMI(t, c, ns, name, time.Minute, "on its new node, migratable", func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName != m.Status.MigrationState.TargetNode {
			return fmt.Errorf("on %s", got.Status.NodeName)
		}
		return framework.LiveMigratable(corev1.ConditionTrue, "", "")(got)
	})
	return r
}

// nodeLibvirtd is a bare libvirtd running as on an extra node.
type nodeLibvirtd struct {
	node, netns, mountns string
	addr                 string
	uri                  string
}

// startNodeLibvirtd starts a libvirtd (and its virtlogd) in node's network
// and mount namespaces, with its own state on tmpfs so it shares nothing
// with the first node's, and its socket in a directory of this machine.
func startNodeLibvirtd(t *testing.T, f *framework.Framework, node string) *nodeLibvirtd {
	t.Helper()
	netns, mountns, ip, ok := f.NodeNamespaces(node)
	if !ok {
		t.Fatalf("node %s is not an extra node of the testbed", node)
	}
	dir, err := os.MkdirTemp("", "tekvirt-bench-libvirtd-")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "libvirtd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("unix_sock_dir = %q\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\n", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"set -e",
		"for d in /run/libvirt /var/lib/libvirt /var/cache/libvirt; do mkdir -p $d; mount -t tmpfs tmpfs $d; done",
		"/usr/sbin/virtlogd -d -p " + filepath.Join(dir, "virtlogd.pid"),
		"exec /usr/sbin/libvirtd -f " + conf + " -p " + filepath.Join(dir, "libvirtd.pid"),
	}, "\n")
	cmd := exec.Command("nsenter", "--net="+netns, "--mount="+mountns, "unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	logf, err := os.Create(filepath.Join(dir, "libvirtd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &nodeLibvirtd{node: node, netns: netns, mountns: mountns, addr: ip.String(),
		uri: "qemu+unix:///system?socket=" + filepath.Join(dir, "libvirt-sock")}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if pid, err := os.ReadFile(filepath.Join(dir, "virtlogd.pid")); err == nil {
			_ = exec.Command("kill", strings.TrimSpace(string(pid))).Run()
		}
		_ = logf.Close()
		_ = os.RemoveAll(dir)
	})
	framework.Eventually(t, time.Minute, "the bare libvirtd on "+node, func() error {
		if out, err := exec.Command("virsh", "-c", l.uri, "version").CombinedOutput(); err != nil {
			log, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("%w: %s; log: %s", err, out, log)
		}
		return nil
	})
	return l
}

// onNode runs a command as on the bare libvirtd's node.
func (l *nodeLibvirtd) onNode(args ...string) ([]byte, error) {
	return exec.Command("nsenter", append([]string{"--net=" + l.netns, "--mount=" + l.mountns}, args...)...).CombinedOutput()
}

// virshMigrate starts the domain the launcher would build for the guest on
// the first node's libvirtd (as TestVMIStartOverhead's baseline does),
// waits for its agent, and migrates it with `virsh migrate --live
// --copy-storage-all` to the bare libvirtd on the other node, whose disks
// are made beforehand as libvirt wants them (same paths, same sizes, on
// that node's own /var/lib/tekvirt). It returns the virsh command's time
// and QEMU's figures.
func virshMigrate(t *testing.T, f *framework.Framework, l *nodeLibvirtd, i int) migrationRun {
	t.Helper()
	dir := filepath.Join(cluster.NodeRoot, "bench", "migrate-"+strconv.Itoa(i))
	there := framework.HostPath(l.node, dir)
	for _, d := range []string{dir, there} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("chown", "libvirt-qemu", d).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	defer func() { _ = os.RemoveAll(dir); _ = os.RemoveAll(there) }()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("virsh-migrate-%d", i),
		UID: types.UID(fmt.Sprintf("7f1d2c3b-0000-4000-8000-%012d", i))}, Spec: framework.GuestVMI(framework.GuestImage, "bench")}
	opts := framework.GuestFiles(t, vmi, dir)
	tap := fmt.Sprintf("tkvmig%d", i)
	if out, err := exec.Command("ip", "tuntap", "add", "dev", tap, "mode", "tap").CombinedOutput(); err != nil {
		t.Fatalf("a tap for the bare domain: %v %s", err, out)
	}
	defer func() { _ = exec.Command("ip", "link", "del", tap).Run() }()
	if out, err := l.onNode("ip", "tuntap", "add", "dev", tap, "mode", "tap"); err != nil {
		t.Fatalf("a tap on %s: %v %s", l.node, err, out)
	}
	defer func() { _, _ = l.onNode("ip", "link", "del", tap) }()
	opts.Interfaces = map[string]domain.Interface{domain.DefaultInterface: {Tap: tap, MAC: "52:54:00:be:4d:0" + strconv.Itoa(i%10)}}
	// The disks the migration copies into, as large as the source's.
	for _, v := range opts.Volumes {
		out, err := exec.Command("qemu-img", "info", "--output=json", v.Path).Output()
		var info struct {
			VirtualSize int64 `json:"virtual-size"`
		}
		if err != nil || json.Unmarshal(out, &info) != nil {
			t.Fatalf("qemu-img info %s: %v", v.Path, err)
		}
		dst := framework.HostPath(l.node, v.Path)
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", v.Format, dst, strconv.FormatInt(info.VirtualSize, 10)).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create %s: %v %s", dst, err, out)
		}
		if out, err := exec.Command("chown", "libvirt-qemu", dst).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	name, xmlPath := writeDomain(t, vmi, opts, dir)
	src := libvirtURI(f)
	if out, err := exec.Command("virsh", "-c", src, "create", xmlPath).CombinedOutput(); err != nil {
		t.Fatalf("virsh create: %v %s", err, out)
	}
	defer func() {
		_ = exec.Command("virsh", "-c", src, "destroy", name).Run()
		_ = exec.Command("virsh", "-c", l.uri, "destroy", name).Run()
	}()
	framework.Eventually(t, 3*time.Minute, "the bare guest's agent", func() error {
		out, err := exec.Command("virsh", "-c", src, "qemu-agent-command", "--timeout", "1", name, `{"execute":"guest-ping"}`).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "return") {
			return fmt.Errorf("%w %s", err, out)
		}
		return nil
	})
	start := time.Now()
	out, err := exec.Command("virsh", "-c", src, "migrate", "--live", "--copy-storage-all", name, l.uri,
		"--migrateuri", "tcp://"+l.addr+":49152", "--disks-uri", "tcp://"+l.addr+":49153", "--listen-address", l.addr).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh migrate: %v %s", err, out)
	}
	r := migrationRun{total: time.Since(start)}
	info, err := exec.Command("virsh", "-c", l.uri, "domjobinfo", "--completed", name).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh domjobinfo --completed on %s: %v %s", l.node, err, info)
	}
	r.elapsed, r.downtime = jobField(t, info, "Time elapsed"), jobField(t, info, "Total downtime")
	return r
}

// jobField reads a "Name: N ms" line of `virsh domjobinfo`.
func jobField(t *testing.T, info []byte, name string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+)\s+ms`).FindSubmatch(info)
	if m == nil {
		t.Fatalf("no %q in domjobinfo:\n%s", name, info)
	}
	ms, _ := strconv.Atoi(string(m[1]))
	return time.Duration(ms) * time.Millisecond
}
