package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// inGuest runs script in vmi's guest through its own libvirtd's agent
// channel (directAgent) and returns its output.
func inGuest(t *testing.T, vmi *v1.VirtualMachineInstance, script string) string {
	t.Helper()
	a, _ := directAgent(t, vmi)
	return guestRun(t, a, script)
}

// runningVMI starts the test guest as VMI ns/name and returns it once it
// runs with its agent and can migrate.
func runningVMI(t *testing.T, c client.Client, ns, name string, labels map[string]string) *v1.VirtualMachineInstance {
	t.Helper()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: framework.GuestVMI(framework.GuestImage, name)}
	if err := c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, name, 3*time.Minute, "running", framework.AgentConnected)
	return framework.WaitVMI(t, c, ns, name, time.Minute, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
}

// migrateOnce creates a migration of VMI ns/name and waits for it to end.
func migrateOnce(t *testing.T, c client.Client, ns, name, mig string, timeout time.Duration) (*v1.VirtualMachineInstanceMigration, time.Duration) {
	t.Helper()
	ctx := context.Background()
	m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mig}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: name}}
	start := time.Now()
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	for m.Status.Phase != v1.MigrationSucceeded && m.Status.Phase != v1.MigrationFailed {
		if time.Since(start) > timeout {
			t.Fatalf("migration %s not ended after %s: %s", mig, timeout, m.Status.Phase)
		}
		time.Sleep(100 * time.Millisecond)
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
	}
	return m, time.Since(start)
}

// TestMigrationAutoConverge: a guest dirtying memory faster than its
// migration may carry it (a MigrationPolicy caps it at 16 MiB/s; the guest
// rewrites 32 MiB of random data every second in a tmpfs) migrates without
// and then with the policy's allowAutoConverge, libvirt throttling its
// vCPUs in the second run. Without, it ends when its completion timeout
// (the policy's 240 s per GiB) aborts it; with, it should converge.
func TestMigrationAutoConverge(t *testing.T) {
	f := benchOnly(t)
	f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	bw := resource.MustParse("16Mi")
	policy := &migrationsv1alpha1.MigrationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench-converge-" + ns},
		Spec: migrationsv1alpha1.MigrationPolicySpec{
			BandwidthPerMigration: &bw, CompletionTimeoutPerGiB: ptr.To(int64(240)), AllowAutoConverge: ptr.To(false),
			Selectors: &migrationsv1alpha1.Selectors{NamespaceSelector: migrationsv1alpha1.LabelSelector{"kubernetes.io/metadata.name": ns}}}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), policy) })
	vmi := runningVMI(t, c, ns, "dirty", nil)
	out := inGuest(t, vmi, "mkdir -p /mnt/mem && mount -t tmpfs tmpfs /mnt/mem && dd if=/dev/urandom of=/mnt/mem/src bs=1M count=32 2>/dev/null && "+
		"(while true; do dd if=/mnt/mem/src of=/mnt/mem/dst bs=1M count=32 conv=notrunc 2>/dev/null; sleep 1; done) </dev/null >/dev/null 2>&1 & echo dirtying")
	if !strings.Contains(out, "dirtying") {
		t.Fatalf("starting the dirtier: %q", out)
	}
	for i, converge := range []bool{false, true} {
		policy.Spec.AllowAutoConverge = ptr.To(converge)
		if err := c.Update(ctx, policy); err != nil {
			t.Fatal(err)
		}
		m, took := migrateOnce(t, c, ns, vmi.Name, fmt.Sprintf("converge-%d", i), 10*time.Minute)
		reason := ""
		if ms := m.Status.MigrationState; ms != nil {
			reason = ms.FailureReason
		}
		t.Logf("allowAutoConverge %v: %s in %s %s", converge, m.Status.Phase, took.Round(100*time.Millisecond), reason)
		vmi = framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "running, migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
	}
}

// TestDrainThreeVMs: three guests on one node (the other cordoned while
// they start), the HyperConverged's LiveMigrate: `kubectl drain` of their
// node moves all three to the other; the drain's time, each migration's,
// and every guest keeps its boot.
func TestDrainThreeVMs(t *testing.T) {
	f := benchOnly(t)
	first, second := f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(f.Bin("kubectl"), append([]string{"--kubeconfig", f.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	kubectl("cordon", second)
	t.Cleanup(func() {
		_ = exec.Command(f.Bin("kubectl"), "--kubeconfig", f.Kubeconfig, "uncordon", first).Run()
		_ = exec.Command(f.Bin("kubectl"), "--kubeconfig", f.Kubeconfig, "uncordon", second).Run()
	})
	labels := map[string]string{"bench-drain": ns}
	var vmis []*v1.VirtualMachineInstance
	boots := map[string]string{}
	for i := 0; i < 3; i++ {
		vmi := runningVMI(t, c, ns, fmt.Sprintf("drained-%d", i), labels)
		if vmi.Status.NodeName != first {
			t.Fatalf("%s runs on %s, not %s", vmi.Name, vmi.Status.NodeName, first)
		}
		boots[vmi.Name] = strings.TrimSpace(inGuest(t, vmi, "cat /proc/sys/kernel/random/boot_id"))
		vmis = append(vmis, vmi)
	}
	kubectl("uncordon", second)
	start := time.Now()
	kubectl("drain", first, "--pod-selector=kubevirt.io=virt-launcher,bench-drain="+ns, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=10m")
	took := time.Since(start)
	kubectl("uncordon", first)
	list := &v1.VirtualMachineInstanceMigrationList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var each []string
	for _, m := range list.Items {
		var created, ended time.Time
		for _, p := range m.Status.PhaseTransitionTimestamps {
			switch p.Phase {
			case v1.MigrationPending:
				created = p.PhaseTransitionTimestamp.Time
			case v1.MigrationSucceeded, v1.MigrationFailed:
				ended = p.PhaseTransitionTimestamp.Time
			}
		}
		each = append(each, fmt.Sprintf("%s %s %s", m.Spec.VMIName, m.Status.Phase, ended.Sub(created)))
	}
	t.Logf("kubectl drain %s with 3 VMs: %s; migrations: %s", first, took.Round(100*time.Millisecond), strings.Join(each, "; "))
	for _, vmi := range vmis {
		moved := framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "on "+second, func(got *v1.VirtualMachineInstance) error {
			if got.Status.NodeName != second {
				return fmt.Errorf("on %s", got.Status.NodeName)
			}
			return framework.AgentConnected(got)
		})
		if moved.UID != vmi.UID {
			t.Errorf("%s was replaced, not migrated", vmi.Name)
		}
		if got := strings.TrimSpace(inGuest(t, moved, "cat /proc/sys/kernel/random/boot_id")); got != boots[vmi.Name] {
			t.Errorf("%s booted again: %s, was %s", vmi.Name, got, boots[vmi.Name])
		}
	}
}
