package e2e

import (
	"context"
	"crypto/md5" //nolint:gosec // the guest's checksum chain, not security
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// runningMigration creates migration ns/name of VMI vmName and returns it
// once it runs (the source migrates to the prepared target).
func runningMigration(t *testing.T, c client.Client, ns, name, vmName string) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmName}}
	if err := c.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 3*time.Minute, "migration "+name+" runs", func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.Phase != v1.MigrationRunning {
			return fmt.Errorf("phase %q", m.Status.Phase)
		}
		return nil
	})
	return m
}

// endedMigration waits for migration m to end and returns it.
func endedMigration(t *testing.T, c client.Client, m *v1.VirtualMachineInstanceMigration, timeout time.Duration) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	framework.Eventually(t, timeout, "migration "+m.Name+" ended", func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if p := m.Status.Phase; p != v1.MigrationSucceeded && p != v1.MigrationFailed {
			return fmt.Errorf("phase %q, state %+v", p, m.Status.MigrationState)
		}
		return nil
	})
	return m
}

// TestMigrationFaults hits one VM's migrations while they run, slowed by a
// MigrationPolicy that selects the VM (1 MiB/s, a guest with 40 MiB of
// random data in memory): its target Pod deleted, virtctl migrate-cancel,
// the source node's handler restarted. Each migration fails cleanly, the
// target Pod goes, and the guest runs on where it was, untouched (same
// boot, same memory), in one QEMU. Then the policy lets the workload be
// disrupted past a 10 s completion timeout: the guest, dirtying its
// memory faster than 1 MiB/s, is paused so that the migration ends, and
// runs on the other node.
func TestMigrationFaults(t *testing.T) {
	migrationHeavy(t, "four slowed migrations and a handler restart (about 5 min)")
	// Not parallel: a node's handler restarts.
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	bw := resource.MustParse("1Mi")
	policy := &migrationsv1alpha1.MigrationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-slow-" + ns},
		Spec: migrationsv1alpha1.MigrationPolicySpec{BandwidthPerMigration: &bw,
			Selectors: &migrationsv1alpha1.Selectors{VirtualMachineInstanceSelector: migrationsv1alpha1.LabelSelector{"e2e-migration-policy": ns}}}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), policy) })

	vm, vmi, boot := migratableVM(t, f, c, ns, "target", func(vm *v1.VirtualMachine) {
		metav1.SetMetaDataLabel(&vm.Spec.Template.ObjectMeta, "e2e-migration-policy", ns)
	})
	source := vmi.Status.NodeName
	out := guestShell(t, f, vmi, "mkdir -p /mnt/mem && mount -t tmpfs tmpfs /mnt/mem && dd if=/dev/urandom of=/mnt/mem/pattern bs=1M count=40 2>/dev/null && md5sum /mnt/mem/pattern")
	pattern := strings.Fields(out)[0]
	// untouched: the VM runs where it was, one QEMU, same boot and memory.
	untouched := func(after string) {
		t.Helper()
		got := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "running on "+source+" after "+after, func(got *v1.VirtualMachineInstance) error {
			if got.Status.NodeName != source || got.Status.Phase != v1.Running || got.Labels[v1.MigrationTargetNodeNameLabel] != "" || len(got.Status.ActivePods) != 1 {
				return fmt.Errorf("on %q, %s, labels %v, active Pods %v", got.Status.NodeName, got.Status.Phase, got.Labels, got.Status.ActivePods)
			}
			return framework.AgentConnected(got)
		})
		framework.Eventually(t, time.Minute, "one QEMU runs the domain", func() error {
			if n := framework.QEMUCount(domain.Name(vmi)); n != 1 {
				return fmt.Errorf("%d QEMUs", n)
			}
			return nil
		})
		if got.UID != vmi.UID || guestBootID(t, f, got) != boot {
			t.Errorf("after %s the guest booted again, or its VMI changed", after)
		}
		if mem := guestShell(t, f, got, "md5sum /mnt/mem/pattern"); !strings.Contains(mem, pattern) {
			t.Errorf("after %s the guest's memory pattern is %q, want %s", after, mem, pattern)
		}
	}
	targetGone := func(m *v1.VirtualMachineInstanceMigration) {
		t.Helper()
		framework.Eventually(t, time.Minute, "the target Pod of "+m.Name+" gone", func() error {
			pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.MigrationJobLabel + "=" + string(m.UID)})
			if err != nil {
				return err
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
					return fmt.Errorf("Pod %s %s", p.Name, p.Status.Phase)
				}
			}
			return nil
		})
	}

	// The target Pod deleted mid-migration.
	m := runningMigration(t, c, ns, "target-deleted", vm.Name)
	if ms := m.Status.MigrationState; ms == nil || ms.MigrationPolicyName == nil || *ms.MigrationPolicyName != policy.Name || ms.VMIMConfigurationOptions == nil ||
		ms.VMIMConfigurationOptions.BandwidthPerMigration.Value() != 1<<20 {
		t.Errorf("the migration does not go by policy %s: %+v", policy.Name, ms)
	}
	// The source's handler reports its progress.
	reader := metricsReader(t, f, ns)
	framework.Eventually(t, 30*time.Second, "the migration's progress in the source handler's metrics", func() error {
		code, body := scrapeHandler(t, f, source, reader)
		labels := fmt.Sprintf(`{name="%s",namespace="%s",node="%s"}`, vm.Name, ns, source)
		for _, metric := range []string{"kubevirt_vmi_migration_data_processed_bytes", "kubevirt_vmi_migration_data_remaining_bytes"} {
			if code != http.StatusOK || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(metric+labels)+` [1-9]`).MatchString(body) {
				return fmt.Errorf("scrape %d: no %s%s above 0", code, metric, labels)
			}
		}
		return nil
	})
	if err := f.Kube.CoreV1().Pods(ns).Delete(ctx, m.Status.MigrationState.TargetPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m = endedMigration(t, c, m, 2*time.Minute)
	if m.Status.Phase != v1.MigrationFailed || m.Status.MigrationState == nil || m.Status.MigrationState.FailureReason == "" {
		t.Errorf("target Pod deleted: migration %s, state %+v", m.Status.Phase, m.Status.MigrationState)
	}
	t.Logf("target Pod deleted: %s: %s", m.Status.Phase, m.Status.MigrationState.FailureReason)
	events, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + m.Name + ",reason=AbortingMigration"})
	if err != nil || len(events.Items) == 0 || !strings.Contains(events.Items[0].Message, "target Pod "+m.Status.MigrationState.TargetPod+" ended") {
		t.Errorf("no event says why migration %s was aborted: %v %v", m.Name, events, err)
	}
	targetGone(m)
	untouched("its target Pod was deleted")

	// Cancelled while it runs.
	m = runningMigration(t, c, ns, "cancelled", vm.Name)
	if out := virtctl(t, "migrate-cancel", vm.Name, "-n", ns); !strings.Contains(out, "was scheduled to migrate-cancel") {
		t.Errorf("virtctl migrate-cancel said %q", out)
	}
	framework.WaitGone(t, c, m, 2*time.Minute)
	got := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
		t.Fatal(err)
	}
	if ms := got.Status.MigrationState; ms == nil || ms.MigrationUID != m.UID || !ms.Failed || !ms.AbortRequested || ms.AbortStatus != v1.MigrationAbortSucceeded {
		t.Errorf("cancelled: the VMI's migration state %+v", ms)
	}
	targetGone(m)
	untouched("its migration was cancelled")

	// The source node's handler restarted: the streams it carried break.
	m = runningMigration(t, c, ns, "handler-restarted", vm.Name)
	f.RestartHandler(t, source)
	m = endedMigration(t, c, m, 3*time.Minute)
	t.Logf("source handler restarted: %s %+v", m.Status.Phase, m.Status.MigrationState)
	switch m.Status.Phase {
	case v1.MigrationFailed:
		targetGone(m)
		untouched("its source handler restarted")
	default:
		// Completed before the streams broke: the VM is on the target only.
		t.Logf("the migration ended before the handler went")
		source = m.Status.MigrationState.TargetNode
		untouched("its source handler restarted and it completed")
	}

	// Past the completion timeout, the guest is paused so that the
	// migration ends, and the target resumes it.
	if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.CompletionTimeoutPerGiB, policy.Spec.AllowWorkloadDisruption = ptr[int64](10), ptr(true)
	if err := c.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	// The guest dirties its memory faster than the migration carries it:
	// only the pause lets the migration end.
	guestShell(t, f, vmi, "(while true; do dd if=/dev/urandom of=/mnt/mem/dirty bs=1M count=4 conv=notrunc 2>/dev/null; done) </dev/null >/dev/null 2>&1 & echo $! > /tmp/dirtier")
	m = runningMigration(t, c, ns, "paused-to-finish", vm.Name)
	start := time.Now()
	m = endedMigration(t, c, m, 5*time.Minute)
	t.Logf("workload disruption allowed, the guest dirtying its memory: %s in %s", m.Status.Phase, time.Since(start).Round(time.Second))
	if m.Status.Phase != v1.MigrationSucceeded {
		t.Fatalf("workload disruption allowed: migration %s, state %+v", m.Status.Phase, m.Status.MigrationState)
	}
	logs, err := f.Kube.CoreV1().Pods(ns).GetLogs(m.Status.MigrationState.SourcePod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "guest paused so that its migration ends") {
		t.Errorf("the source launcher %s did not say it paused the guest: %v", m.Status.MigrationState.SourcePod, err)
	}
	moved := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "running on the other node, not paused", func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName == source {
			return fmt.Errorf("on %s", got.Status.NodeName)
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineInstancePaused && cond.Status == corev1.ConditionTrue {
				return fmt.Errorf("paused: %s", cond.Message)
			}
		}
		return framework.AgentConnected(got)
	})
	if guestBootID(t, f, moved) != boot {
		t.Error("the guest booted again after its paused migration")
	}
	if mem := guestShell(t, f, moved, "kill $(cat /tmp/dirtier); md5sum /mnt/mem/pattern"); !strings.Contains(mem, pattern) {
		t.Errorf("after the paused migration the guest's memory pattern is %q, want %s", mem, pattern)
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Get(ctx, m.Status.MigrationState.TargetPod, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Errorf("the VMI's new launcher Pod %s is gone", m.Status.MigrationState.TargetPod)
	}
}

// TestMigrationMemoryIntegrity migrates a guest back and forth ten times
// while it works: it appends a checksum chain to a file on its disk every
// 10 ms and copies a 32 MiB random pattern in memory over and over. After
// the ten migrations the chain is unbroken and every copy of the pattern
// is intact, so no page the guest wrote during a migration was lost
// (QEMU before 9.0 could lose dirty pages of a TCG guest).
func TestMigrationMemoryIntegrity(t *testing.T) {
	migrationHeavy(t, "ten migrations of a busy guest (about 3 min)")
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	vm, vmi, boot := migratableVM(t, f, c, ns, "busy")
	out := guestShell(t, f, vmi, `mkdir -p /mnt/mem && mount -t tmpfs tmpfs /mnt/mem &&
dd if=/dev/urandom of=/mnt/mem/pattern bs=1M count=32 2>/dev/null && md5sum /mnt/mem/pattern | cut -d' ' -f1 > /mnt/mem/want &&
cat > /tmp/work <<'W'
prev=start; i=0
while [ ! -e /tmp/stop ]; do
  i=$((i+1)); line="$i $prev"; echo "$line" >> /var/chain
  prev=$(echo "$line" | md5sum | cut -c1-8)
  if [ $((i % 50)) = 0 ]; then cp /mnt/mem/pattern /mnt/mem/copy.tmp && mv /mnt/mem/copy.tmp /mnt/mem/copy; fi
  usleep 10000
done
echo stopped > /tmp/stopped
W
(sh /tmp/work) </dev/null >/dev/null 2>&1 & cat /mnt/mem/want`)
	want := strings.TrimSpace(out)
	nodes := map[string]bool{}
	for i := 1; i <= 10; i++ {
		m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("round-%d", i)}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vm.Name}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		m = endedMigration(t, c, m, 5*time.Minute)
		if m.Status.Phase != v1.MigrationSucceeded {
			t.Fatalf("migration %d: %s %+v", i, m.Status.Phase, m.Status.MigrationState)
		}
		got := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "taken over", func(got *v1.VirtualMachineInstance) error {
			if got.Status.NodeName != m.Status.MigrationState.TargetNode {
				return fmt.Errorf("on %s", got.Status.NodeName)
			}
			return framework.AgentConnected(got)
		})
		nodes[got.Status.NodeName] = true
		check := guestShell(t, f, got, "md5sum /mnt/mem/pattern /mnt/mem/copy 2>&1; wc -l < /var/chain")
		t.Logf("migration %d to %s in %s; the guest: %s", i, got.Status.NodeName, time.Since(start).Round(100*time.Millisecond), strings.Join(strings.Fields(check), " "))
		if strings.Count(check, want) != 2 {
			t.Errorf("after migration %d the memory pattern (%s) and its copy read %q", i, want, check)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("the VM ran on %v, want both nodes", nodes)
	}
	last := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "running", framework.AgentConnected)
	// Stop the writer, then check each line's link to the one before.
	chain := guestShell(t, f, last, "touch /tmp/stop; while [ ! -e /tmp/stopped ]; do usleep 50000; done; cat /var/chain")
	lines, broken := checkChain(chain)
	t.Logf("the checksum chain: %d lines, %d broken", lines, broken)
	if lines < 100 || broken != 0 {
		t.Errorf("the guest's checksum chain after ten migrations: %d lines, %d broken", lines, broken)
	}
	if got := guestBootID(t, f, last); got != boot || last.UID != vmi.UID {
		t.Errorf("the guest booted again, or its VMI changed")
	}
}

// checkChain counts the lines of the guest's checksum chain ("i prev",
// prev the first 8 hex digits of the MD5 of the line before, with its
// newline) and those that do not follow from the line before.
func checkChain(chain string) (lines, broken int) {
	prev := "start"
	for _, line := range strings.Split(strings.TrimSpace(chain), "\n") {
		lines++
		if line != fmt.Sprintf("%d %s", lines, prev) {
			broken++
		}
		sum := md5.Sum([]byte(line + "\n"))
		prev = hex.EncodeToString(sum[:])[:8]
	}
	return lines, broken
}

// TestMigrationUnschedulableTimesOut: a migration whose target cannot be
// placed (addedNodeSelector matching no node) waits in Scheduling, then
// fails after KubeVirt's 5 minutes, saying so with the scheduler's
// message; its target Pod goes and the VM runs on where it was, same boot.
func TestMigrationUnschedulableTimesOut(t *testing.T) {
	migrationHeavy(t, "waits out the 5-minute unschedulable timeout")
	t.Parallel() // mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	vm, vmi, boot := migratableVM(t, f, c, ns, "unplaced")
	m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere"},
		Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vm.Name, AddedNodeSelector: map[string]string{corev1.LabelHostname: "nowhere"}}}
	start := time.Now()
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m = endedMigration(t, c, m, 8*time.Minute)
	took := time.Since(start)
	reason := ""
	if ms := m.Status.MigrationState; ms != nil {
		reason = ms.FailureReason
	}
	t.Logf("unschedulable migration: %s after %s: %s", m.Status.Phase, took.Round(time.Second), reason)
	if m.Status.Phase != v1.MigrationFailed || took < 5*time.Minute || !strings.Contains(reason, "unschedulable for 5m0s") ||
		!strings.Contains(reason, "didn't match Pod's node affinity/selector") {
		t.Errorf("migration %s after %s, reason %q; want Failed after 5m, naming the timeout and the scheduler's message", m.Status.Phase, took, reason)
	}
	framework.Eventually(t, time.Minute, "the target Pod gone", func() error {
		pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.MigrationJobLabel + "=" + string(m.UID)})
		if err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d target Pods", len(pods.Items))
		}
		return nil
	})
	after := framework.WaitVMI(t, c, ns, vm.Name, 30*time.Second, "running where it was", func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName != vmi.Status.NodeName || got.Status.Phase != v1.Running {
			return fmt.Errorf("on %q, %s", got.Status.NodeName, got.Status.Phase)
		}
		return framework.AgentConnected(got)
	})
	if after.UID != vmi.UID || guestBootID(t, f, after) != boot {
		t.Errorf("the VM was disturbed: UID %s (was %s)", after.UID, vmi.UID)
	}
}
