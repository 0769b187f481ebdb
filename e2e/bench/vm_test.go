package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"libvirt.org/go/libvirt"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

func libvirtURI(f *framework.Framework) string {
	return "qemu:///system?socket=" + filepath.Join(f.Home, "run", "libvirt", "libvirt-sock")
}

// oursStart creates a VMI and returns the time until the API reports it
// Running with its guest agent connected, then deletes it.
func oursStart(t *testing.T, c client.Client, ns string, i int) time.Duration {
	t.Helper()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bench-%d", i)},
		Spec: framework.GuestVMI(framework.GuestImage, "bench")}
	start := time.Now()
	if err := c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	for framework.AgentConnected(vmi) != nil {
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("VMI %s not running with its agent after 3m: %+v", vmi.Name, vmi.Status)
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vmi), vmi); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	if err := c.Delete(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, vmi, 2*time.Minute)
	return took
}

// virshStart writes the same domain XML the launcher builds for that VMI
// (its own overlay on the cached containerDisk, its seed, and a tap made
// beforehand, as the handler makes one), and returns the time from `virsh
// create` until the guest agent answers guest-ping.
func virshStart(t *testing.T, f *framework.Framework, i int) time.Duration {
	t.Helper()
	dir := filepath.Join(cluster.NodeRoot, "bench", strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if out, err := exec.Command("chown", "libvirt-qemu", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("virsh-%d", i),
		UID: types.UID(fmt.Sprintf("6f1d2c3b-0000-4000-8000-%012d", i))}, Spec: framework.GuestVMI(framework.GuestImage, "bench")}
	opts := framework.GuestFiles(t, vmi, dir)
	tap := fmt.Sprintf("tkvbench%d", i)
	if out, err := exec.Command("ip", "tuntap", "add", "dev", tap, "mode", "tap").CombinedOutput(); err != nil {
		t.Fatalf("a tap for the bare domain: %v %s", err, out)
	}
	defer func() { _ = exec.Command("ip", "link", "del", tap).Run() }()
	opts.Interfaces = map[string]domain.Interface{domain.DefaultInterface: {Tap: tap, MAC: "52:54:00:be:4c:0" + strconv.Itoa(i%10)}}
	name, xmlPath := writeDomain(t, vmi, opts, dir)
	uri := libvirtURI(f)
	start := time.Now()
	if out, err := exec.Command("virsh", "-c", uri, "create", xmlPath).CombinedOutput(); err != nil {
		t.Fatalf("virsh create: %v %s", err, out)
	}
	defer func() { _ = exec.Command("virsh", "-c", uri, "destroy", name).Run() }()
	for {
		out, err := exec.Command("virsh", "-c", uri, "qemu-agent-command", "--timeout", "1", name, `{"execute":"guest-ping"}`).CombinedOutput()
		if err == nil && strings.Contains(string(out), "return") {
			return time.Since(start)
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("guest agent of %s never answered: %s", name, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeDomain writes the domain the launcher builds for vmi with opts into
// dir, and returns its name and the file.
func writeDomain(t *testing.T, vmi *v1.VirtualMachineInstance, opts domain.Options, dir string) (string, string) {
	t.Helper()
	d, err := domain.Convert(vmi, opts)
	if err != nil {
		t.Fatal(err)
	}
	xml, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(path, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	return d.Name, path
}

// TestVMIStartOverhead compares VMI create -> Running with the agent
// connected (launcher Pod, kube-scheduler, the handler's preparation)
// against a bare `virsh create` of the same domain XML on the node's
// libvirtd, until its agent answers; interleaved, median of 5 each.
func TestVMIStartOverhead(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	var ours, bare []time.Duration
	for i := 0; i < runs; i++ {
		ours = append(ours, oursStart(t, c, ns, i))
		bare = append(bare, virshStart(t, f, i))
	}
	mo, mb := median(ours), median(bare)
	t.Logf("bare virsh create -> guest agent answers: median %s of %v", mb, bare)
	t.Logf("VMI create -> Running, AgentConnected, launcher Pod: median %s of %v", mo, ours)
	t.Logf("overhead %s, ratio %.2f (target overhead < 1.5s)", (mo - mb).Round(10*time.Millisecond), float64(mo)/float64(mb))
}

// directAgent is the guest agent of vmi straight through the launcher
// Pod's own libvirtd (reached through the root of QEMU's parent, the
// launcher, its container's init), the baseline of what goes through
// tekvirt; and QEMU's PID. Both are closed when the test ends.
func directAgent(t *testing.T, vmi *v1.VirtualMachineInstance) (*agent.Client, int) {
	t.Helper()
	qemu := framework.QEMUPid(domain.Name(vmi))
	if qemu == 0 {
		t.Fatalf("no QEMU runs domain %s", domain.Name(vmi))
	}
	launcher := framework.ParentPID(t, qemu)
	// The launcher runs unprivileged: its daemon is a session one.
	conn, err := libvirt.NewConnect("qemu:///session?socket=" + fmt.Sprintf("/proc/%d/root", launcher) + launcherpod.LibvirtdDir + "/libvirt-sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Close() })
	dom, err := conn.LookupDomainByName(domain.Name(vmi))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dom.Free() })
	return agent.New(libvirtAgent{dom}), qemu
}

// libvirtAgent runs guest agent commands straight through libvirt.
type libvirtAgent struct{ dom *libvirt.Domain }

func (a libvirtAgent) Command(_ context.Context, cmd []byte) ([]byte, error) {
	out, err := a.dom.QemuAgentCommand(string(cmd), libvirt.DOMAIN_QEMU_AGENT_COMMAND_DEFAULT, 0)
	return []byte(out), err
}

// rssMiB reads a process's resident memory.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// podProcs are the processes in pid's container (its pids cgroup).
func podProcs(t *testing.T, pid int) []int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && (f[1] == "pids" || f[0] == "0") {
			dir := filepath.Join("/sys/fs/cgroup", f[2])
			if f[1] == "pids" {
				dir = filepath.Join("/sys/fs/cgroup/pids", f[2])
			}
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil {
				t.Fatal(err)
			}
			var out []int
			for _, p := range strings.Fields(string(procs)) {
				n, _ := strconv.Atoi(p)
				out = append(out, n)
			}
			return out
		}
	}
	t.Fatalf("no pids cgroup of %d", pid)
	return nil
}

// TestExecuteInVMOverhead compares an execute-in-vm TaskRun (create ->
// Succeeded) with a guest-exec of the same command straight from Go through
// libvirt, interleaved, median of 5 each; and reports the memory of the
// launcher and handler beside QEMU's.
func TestExecuteInVMOverhead(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	vm := framework.GuestVM(ns, "exec-bench", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	f.BindTaskRole(t, ns, "execute-in-vm")
	direct, qemu := directAgent(t, vmi)
	image := shellImage(t, f)
	var ours, base, trivial []time.Duration
	for i := 0; i < runs; i++ {
		r := framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, vm.Name, "echo bench-ok", "5m")).CreateTaskRun().ExpectSuccess().ExpectLogs("bench-ok")
		ours = append(ours, r.Elapsed)
		r = framework.NewTaskRunRunner(t, f, trivialTaskRun(image)).CreateTaskRun().ExpectSuccess()
		trivial = append(trivial, r.Elapsed)
		start := time.Now()
		res, err := direct.Exec(context.Background(), "/bin/sh", []string{"-c", "echo bench-ok"}, 20*time.Millisecond)
		if err != nil || !strings.Contains(string(res.Stdout), "bench-ok") {
			t.Fatalf("direct guest-exec: %+v %v", res, err)
		}
		base = append(base, time.Since(start))
	}
	mo, mb, mt := median(ours), median(base), median(trivial)
	t.Logf("guest-exec from Go through libvirt: median %s of %v", mb, base)
	t.Logf("trivial one-step TaskRun create->Succeeded: median %s of %v", mt, trivial)
	t.Logf("execute-in-vm TaskRun create->Succeeded: median %s of %v", mo, ours)
	t.Logf("execute-in-vm / direct guest-exec: %.1f; execute-in-vm / trivial TaskRun: %.2f (the pod start dominates)", float64(mo)/float64(mb), float64(mo)/float64(mt))

	var l float64 // the launcher Pod's processes but QEMU: launcher, its init and libvirtd
	for _, pid := range podProcs(t, qemu) {
		if pid != qemu {
			l += rssMiB(t, pid)
		}
	}
	h, q := rssMiB(t, framework.HandlerPID()), rssMiB(t, qemu)
	t.Logf("RSS per VM: launcher Pod but QEMU %.1f MiB, QEMU %.1f MiB (256Mi guest); handler %.1f MiB per node", l, q, h)
	t.Logf("launcher / QEMU: %.2f; (launcher + handler) / QEMU with one VM: %.2f", l/q, (l+h)/q)
}
