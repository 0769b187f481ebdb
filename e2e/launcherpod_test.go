package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	vmipod "github.com/tekvirt/tekvirt/controllers/vmi"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
	"github.com/tekvirt/tekvirt/runtime/launcher"
	"github.com/tekvirt/tekvirt/runtime/podvolume"
)

// logPodMemory logs what the launcher container (launcher, libvirtd and
// QEMU with a 256 MiB guest) uses: the figure the launcher Pod's memory
// overhead is sized by.
func logPodMemory(t *testing.T, qemu int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", qemu))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "memory" {
			stat, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.stat"))
			if err != nil {
				t.Logf("memory of the launcher container: %v", err)
				return
			}
			for _, l := range strings.Split(string(stat), "\n") {
				if k, v, ok := strings.Cut(l, " "); ok && (k == "rss" || k == "cache") {
					n, _ := strconv.ParseInt(v, 10, 64)
					t.Logf("launcher container %s: %.1f MiB", k, float64(n)/(1<<20))
				}
			}
			return
		}
	}
}

// podLauncher is a client of the launcher in pod, through the Pod's volume
// on the node, as the handler reaches it.
func podLauncher(t *testing.T, f *framework.Framework, pod *corev1.Pod) *launcher.Client {
	t.Helper()
	dir, err := launcherpod.EmptyDirOnNode(framework.HostPath(pod.Spec.NodeName, f.KubeletRoot()), pod.UID, launcherpod.VMVolume)
	if err != nil {
		t.Fatal(err)
	}
	vol := podvolume.Dir{Path: dir}
	return launcher.NewClientDial(func(ctx context.Context) (net.Conn, error) { return vol.DialUnix(ctx, launcher.SocketFile) })
}

// kubernetesServiceIP is the cluster IP of the kubernetes Service.
func kubernetesServiceIP(t *testing.T, f *framework.Framework) string {
	t.Helper()
	svc, err := f.Kube.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// qemuOf is the pid of the QEMU running domain name on this machine.
func qemuOf(t *testing.T, name string) int {
	t.Helper()
	pid := framework.QEMUPid(name)
	if pid == 0 {
		t.Fatalf("no QEMU runs domain %s", name)
	}
	return pid
}

// TestVMIInLauncherPod: a VMI opted into the launcher Pod runtime goes the
// whole way through the controller and the node's handler: its launcher Pod
// (KubeVirt's labels) is placed by kube-scheduler, the VMI follows it to
// Scheduled on that node, the handler prepares the VM and the guest runs
// with QEMU in the Pod's cgroup; deleting the VMI ends QEMU and its Pod. A
// VMI no node can take stays Scheduling with kube-scheduler's message.
// The VMI names no network and gets the pod network, reported at the
// Pod's address; from the guest the node's loopback (etcd) is not
// reachable, the kubernetes Service is.
func TestVMIInLauncherPod(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podvm"}, Spec: framework.GuestVMI(framework.GuestImage, "podvm")}
	// Naming no network, it gets the pod network (masquerade), as in KubeVirt.
	vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks = nil, nil
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := framework.WaitVMI(t, c, ns, vmi.Name, 3*time.Minute, "runs in its launcher Pod", framework.AgentConnected)
	t.Logf("VMI create -> agent connected in its launcher Pod: %.1fs", time.Since(start).Seconds())
	pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-launcher,kubevirt.io/created-by=" + string(got.UID)})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("launcher Pods: %v, %v", pods, err)
	}
	pod := pods.Items[0]
	if pod.Spec.NodeName != got.Status.NodeName || got.Labels[v1.NodeNameLabel] != pod.Spec.NodeName {
		t.Errorf("VMI on %q (label %q), its Pod on %q", got.Status.NodeName, got.Labels[v1.NodeNameLabel], pod.Spec.NodeName)
	}
	if ifs := got.Status.Interfaces; len(ifs) != 1 || ifs[0].Name != "default" || ifs[0].IP != pod.Status.PodIP {
		t.Errorf("VMI interfaces %+v, want the default interface at the Pod's address %s", ifs, pod.Status.PodIP)
	}
	qemu := qemuOf(t, domain.Name(got))
	cgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", qemu))
	if err != nil || !strings.Contains(string(cgroup), "pod"+string(pod.UID)) {
		t.Errorf("QEMU %d is not in the launcher Pod's cgroup: %s %v", qemu, cgroup, err)
	}
	logPodMemory(t, qemu)
	qemuNet, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", qemu))
	nodeNet, _ := os.Readlink("/proc/self/ns/net")
	if qemuNet == "" || qemuNet == nodeNet {
		t.Errorf("QEMU's network namespace %q is the node's %q", qemuNet, nodeNet)
	}
	// 10.0.2.1 is the guest's gateway: the bridge in its launcher Pod,
	// where nothing listens on these ports; on the node, 127.0.0.1 serves
	// etcd (2379), the image registry (5000) and the kubelet's health
	// (10248). The kubernetes Service is reachable, as from any pod.
	res, err := podLauncher(t, f, &pod).Exec(ctx, guestexec.Request{Command: "/bin/sh", Args: []string{"-c",
		"for p in 2379 5000 10248; do nc -w 3 10.0.2.1 $p </dev/null; echo loopback-$p=$?; done; nc -w 3 " +
			kubernetesServiceIP(t, f) + " 443 </dev/null; echo service=$?"}, TimeoutSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout) + string(res.Stderr)
	for _, want := range []string{"loopback-2379=1", "loopback-5000=1", "loopback-10248=1", "service=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("from the guest, the node's loopback services must be refused and the kubernetes Service reached: want %s in %q", want, out)
		}
	}

	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, got, 2*time.Minute)
	framework.Eventually(t, time.Minute, "QEMU and the launcher Pod end with the VMI", func() error {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", qemu)); err == nil {
			return fmt.Errorf("QEMU %d still runs", qemu)
		}
		if _, err := f.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still there", pod.Name)
		}
		return nil
	})

	nowhere := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere"}, Spec: framework.GuestVMI(framework.GuestImage, "nowhere")}
	nowhere.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "no-such-node"}
	if err := c.Create(ctx, nowhere); err != nil {
		t.Fatal(err)
	}
	waitScheduling(t, c, ns, nowhere.Name, fmt.Sprintf("0/%d nodes are available", len(f.Nodes(t))))
}

// TestDeletedLauncherPodFailsVMIAndVMRestarts: deleting the launcher Pod
// under a running VM fails its VMI with a reason naming the Pod (a stop
// the VMI did not ask for), and the VM (runStrategy Always) starts a new
// VMI in a new Pod.
func TestDeletedLauncherPodFailsVMIAndVMRestarts(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "always", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	first := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "runs in its launcher Pod", framework.AgentConnected)
	pod := f.LauncherPod(t, first)
	if err := f.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the VMI fails naming its deleted Pod", func() error {
		got := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(first), got); err != nil {
			return err
		}
		if got.UID != first.UID {
			return fmt.Errorf("already replaced: the failure was not seen")
		}
		for _, cond := range got.Status.Conditions {
			if got.Status.Phase == v1.Failed && cond.Type == v1.VirtualMachineInstanceReady && cond.Reason == vmipod.LauncherPodEndedReason &&
				strings.Contains(cond.Message, pod.Name+" was deleted") {
				return nil
			}
		}
		return fmt.Errorf("phase %q, conditions %+v", got.Status.Phase, got.Status.Conditions)
	})
	framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "runs again as a new VMI", func(v *v1.VirtualMachineInstance) error {
		if v.UID == first.UID {
			return fmt.Errorf("still the first VMI (%s)", v.Status.Phase)
		}
		return framework.AgentConnected(v)
	})
}
