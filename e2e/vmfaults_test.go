package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	vmipod "github.com/tekvirt/tekvirt/controllers/vmi"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// failVMI creates vmi as creator, waits (reading with c) until it fails and
// returns its Ready condition, which says why.
func failVMI(t *testing.T, creator, c client.Client, vmi *v1.VirtualMachineInstance) v1.VirtualMachineInstanceCondition {
	t.Helper()
	if err := creator.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	failed := framework.WaitVMI(t, c, vmi.Namespace, vmi.Name, 2*time.Minute, "Failed", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Failed {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		return nil
	})
	failed.DeepCopyInto(vmi)
	// Its launcher Pod, waiting for a VM that will not come, ends too.
	framework.Eventually(t, time.Minute, "the failed VMI's launcher Pod ends", func() error {
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{"kubevirt.io/created-by": string(vmi.UID)}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", p.Name, p.Status.Phase)
			}
		}
		return nil
	})
	return readyCondition(vmi)
}

func readyCondition(vmi *v1.VirtualMachineInstance) v1.VirtualMachineInstanceCondition {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceReady {
			return c
		}
	}
	return v1.VirtualMachineInstanceCondition{}
}

// TestMissingContainerDiskFailsTheVMI: a containerDisk that does not exist
// fails the VMI with a reason naming the image, and the handler keeps
// running (no crash loop).
func TestMissingContainerDiskFailsTheVMI(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	handler := f.HandlerPod(t, nodeName(t, f))
	image := cluster.RegistryAddr + "/tekvirt/does-not-exist:latest"
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"}, Spec: framework.GuestVMI(image, "missing")}
	ready := failVMI(t, c, c, vmi)
	if ready.Reason != "ContainerDiskNotFound" || !strings.Contains(ready.Message, image) {
		t.Errorf("Ready condition = %+v; want reason ContainerDiskNotFound naming %s", ready, image)
	}
	framework.Eventually(t, 30*time.Second, "a Warning event with the reason", func() error {
		return hasEvents(f, vmi, "SuccessfulCreate", "ContainerDiskNotFound")
	})
	if got := f.HandlerPod(t, handler.Spec.NodeName); got.UID != handler.UID || restarts(got) != restarts(handler) {
		t.Errorf("handler Pod %s (%d restarts) -> %s (%d restarts)", handler.UID, restarts(handler), got.UID, restarts(got))
	}
	if err := c.Delete(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, vmi, 30*time.Second)
	// A VM that keeps failing backs off instead of recreating its VMI at once.
	vm := framework.GuestVM(ns, "missing-vm", image, v1.RunStrategyAlways)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "VM in CrashLoopBackOff", func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.PrintableStatus != v1.VirtualMachineStatusCrashLoopBackOff || vm.Status.StartFailure == nil {
			return fmt.Errorf("printableStatus %q, startFailure %+v", vm.Status.PrintableStatus, vm.Status.StartFailure)
		}
		return nil
	})
}

// TestHandlerRestartReadoptsVMs deletes the node's handler Pod while two
// VMs run in their launcher Pods: both keep running (same VMI, same QEMU),
// a TCP connection from a Pod to one of them stays open through the
// restart (the network lives in the launcher Pod, not in the handler),
// and the handler Pod the DaemonSet makes in its place manages them again: deleting one stops its QEMU, ends
// its Pod and removes its files from the node, leaving no tap or bridge
// there; the other runs on.
func TestHandlerRestartReadoptsVMs(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	var vms []*v1.VirtualMachine
	node := nodeName(t, f)
	for _, name := range []string{"first", "second"} {
		vm := framework.GuestVM(ns, name, framework.GuestImage, v1.RunStrategyAlways)
		// Both on the node whose handler goes, which is this machine.
		vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm)
	}
	type running struct {
		uid  types.UID
		qemu int
		pod  string
	}
	before := map[string]running{}
	for _, vm := range vms {
		vmi := framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "running with its agent", framework.AgentConnected)
		before[vm.Name] = running{vmi.UID, framework.QEMUPid(ns + "_" + vm.Name), f.LauncherPod(t, vmi).Name}
	}
	// A connection to the second guest, open before the restart, that
	// sends again 45 s later.
	second := framework.WaitVMI(t, c, ns, vms[1].Name, time.Minute, "running", framework.AgentConnected)
	guestShell(t, f, second, "(sleep 600 | nc -l -p 7000 > /tmp/got 2>&1) < /dev/null > /dev/null 2>&1 &")
	podIP := f.LauncherPod(t, second).Status.PodIP
	conn := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "connected"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "c", Image: registryImage(t, f, "tekvirt/busybox"),
			Command: []string{"sh", "-c", "( echo before; sleep 45; echo after-restart; sleep 2 ) | nc " + podIP + " 7000; echo closed"},
		}}},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, conn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the connection from a Pod open", func() error {
		if got := guestShell(t, f, second, "cat /tmp/got"); !strings.Contains(got, "before") {
			return fmt.Errorf("the guest got %q", got)
		}
		return nil
	})
	f.RestartHandler(t, node)
	for _, vm := range vms {
		b := before[vm.Name]
		vmi := framework.WaitVMI(t, c, ns, vm.Name, 30*time.Second, "still running", framework.AgentConnected)
		if qemu := framework.QEMUPid(ns + "_" + vm.Name); vmi.UID != b.uid || qemu != b.qemu || b.qemu == 0 {
			t.Errorf("VM %s restarted with the handler: VMI %s -> %s, QEMU %d -> %d", vm.Name, b.uid, vmi.UID, b.qemu, qemu)
		}
	}
	framework.Eventually(t, 90*time.Second, "the connection opened before the restart still carries data", func() error {
		if got := guestShell(t, f, second, "cat /tmp/got"); !strings.Contains(got, "after-restart") {
			return fmt.Errorf("the guest got %q", got)
		}
		return nil
	})
	// The new handler owns them: deleting one stops it and removes its files.
	if err := c.Delete(ctx, vms[0]); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vms[0].Name}}, 2*time.Minute)
	framework.Eventually(t, time.Minute, "the deleted VM's QEMU, Pod and files go", func() error {
		if pid := framework.QEMUPid(ns + "_" + vms[0].Name); pid != 0 {
			return fmt.Errorf("QEMU %d still runs", pid)
		}
		if _, err := f.Kube.CoreV1().Pods(ns).Get(ctx, before[vms[0].Name].pod, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still there", before[vms[0].Name].pod)
		}
		if _, err := os.Stat(filepath.Join(framework.VMRoot, string(before[vms[0].Name].uid))); !os.IsNotExist(err) {
			return fmt.Errorf("its directory is still there: %w", err)
		}
		// The tap and bridge were the Pod's: the node never had them.
		for _, link := range []string{podnetwork.BridgeName, podnetwork.TapName(0)} {
			if _, err := net.InterfaceByName(link); err == nil {
				return fmt.Errorf("the node has an interface %s", link)
			}
		}
		return nil
	})
	if pid := framework.QEMUPid(ns + "_" + vms[1].Name); pid != before[vms[1].Name].qemu {
		t.Errorf("the other VM %s stopped too: QEMU %d -> %d", vms[1].Name, before[vms[1].Name].qemu, pid)
	}
}

// restarts sums the restarts of a Pod's containers.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// TestKilledLauncherFailsVMIAndVMRestarts: a killed launcher ends its Pod
// (and QEMU with it) and fails its VMI naming the Pod, and runStrategy
// Always starts a new VMI.
func TestKilledLauncherFailsVMIAndVMRestarts(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "phoenix", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "running with its agent", framework.AgentConnected)
	oldUID := vmi.UID
	oldQEMU := framework.QEMUPid(ns + "_" + vm.Name)
	// QEMU's parent is the launcher, the init of its Pod's container.
	pid := framework.ParentPID(t, oldQEMU)
	// Watch from the VMI's current version on: the VM controller replaces a
	// Failed VMI at once, so a poll could miss it.
	w, err := c.Watch(ctx, &v1.VirtualMachineInstanceList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: vmi.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	failed := make(chan v1.VirtualMachineInstanceCondition, 1)
	go func() {
		for ev := range w.ResultChan() {
			if cur, ok := ev.Object.(*v1.VirtualMachineInstance); ok && cur.UID == oldUID && cur.Status.Phase == v1.Failed {
				failed <- readyCondition(cur)
				return
			}
		}
	}()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The VM's record of the failed VMI is a second witness (it lasts until
	// the new VMI is Ready).
	recorded := false
	framework.Eventually(t, 2*time.Minute, "old VMI failed and a new one running", func() error {
		cur := &v1.VirtualMachineInstance{}
		st := &v1.VirtualMachine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), st); err == nil && st.Status.StartFailure != nil && st.Status.StartFailure.LastFailedVMIUID == oldUID {
			recorded = true
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return err
		}
		if cur.UID == oldUID {
			return fmt.Errorf("old VMI still there, phase %q", cur.Status.Phase)
		}
		return framework.AgentConnected(cur)
	})
	select {
	case ready := <-failed:
		if ready.Reason != vmipod.LauncherPodEndedReason {
			t.Errorf("Failed VMI's Ready condition = %+v, want reason %s", ready, vmipod.LauncherPodEndedReason)
		}
	case <-time.After(5 * time.Second):
		if !recorded {
			t.Error("the old VMI was never reported Failed")
		}
		t.Log("the watch missed the Failed VMI; the VM recorded it as a failed start")
	}
	if pid := framework.QEMUPid(ns + "_" + vm.Name); pid == oldQEMU || pid == 0 {
		t.Errorf("QEMU of the restarted VM %s: %d, the killed launcher's was %d", vm.Name, pid, oldQEMU)
	}
}

// TestExecuteInVMWithoutAgentTimesOut runs execute-in-vm against a VM whose
// disk boots nothing (so no guest agent ever connects).
func TestExecuteInVMWithoutAgentTimesOut(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	blank := filepath.Join(t.TempDir(), "blank.raw")
	if err := os.WriteFile(blank, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	image := cluster.RegistryAddr + "/e2e/blank-container-disk:latest"
	if _, err := ocibuild.Push(ocibuild.Spec{Files: map[string]ocibuild.File{
		"/disk": {Dir: true, Mode: 0o755}, "/disk/blank.raw": {Source: blank, Mode: 0o644},
	}}, image); err != nil {
		t.Fatal(err)
	}
	vm := framework.GuestVM(ns, "silent", image, v1.RunStrategyAlways)
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "Running", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Running {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		return nil
	})
	f.BindTaskRole(t, ns, "execute-in-vm")
	framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, vm.Name, "true", "15s")).
		CreateTaskRun().ExpectFailure("timed out after 15s waiting for the guest agent of VirtualMachineInstance " + ns + "/silent")
}

// TestRefusedLauncherPodExplained: when the API server refuses a VM's
// launcher Pod (here the namespace's ResourceQuota), the user sees why
// where KubeVirt shows it: the VMI's Synchronized=False condition with
// reason FailedCreate and the server's message, a FailedCreate event, and
// the same condition on the VM, which stays Starting.
func TestRefusedLauncherPodExplained(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	vm := framework.GuestVM(ns, "refused", framework.GuestImage, v1.RunStrategyAlways)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	refused := func(conds []v1.VirtualMachineInstanceCondition) error {
		for _, cond := range conds {
			if cond.Type == v1.VirtualMachineInstanceSynchronized && cond.Status == corev1.ConditionFalse &&
				cond.Reason == vmipod.FailedCreateReason && strings.Contains(cond.Message, "quota") {
				return nil
			}
		}
		return fmt.Errorf("no Synchronized=False FailedCreate naming the quota: %+v", conds)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "refused its launcher Pod", func(vmi *v1.VirtualMachineInstance) error {
		return refused(vmi.Status.Conditions)
	})
	framework.Eventually(t, 30*time.Second, "a FailedCreate event on the VMI", func() error {
		return hasEvents(f, vmi, vmipod.FailedCreateReason)
	})
	framework.Eventually(t, 30*time.Second, "the VM shows the condition and stays Starting", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		var conds []v1.VirtualMachineInstanceCondition
		for _, cond := range vm.Status.Conditions {
			conds = append(conds, v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceConditionType(cond.Type),
				Status: cond.Status, Reason: cond.Reason, Message: cond.Message})
		}
		if vm.Status.PrintableStatus != v1.VirtualMachineStatusStarting {
			return fmt.Errorf("printableStatus %s", vm.Status.PrintableStatus)
		}
		return refused(conds)
	})
}
