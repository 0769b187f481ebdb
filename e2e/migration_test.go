package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// waitMigration waits for the one migration of VMI ns/name to end, and
// returns it.
func waitMigration(t *testing.T, c client.Client, ns, name string, timeout time.Duration) *v1.VirtualMachineInstanceMigration {
	t.Helper()
	var m *v1.VirtualMachineInstanceMigration
	framework.Eventually(t, timeout, "the migration of "+ns+"/"+name+" ended", func() error {
		list := &v1.VirtualMachineInstanceMigrationList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		var mine []v1.VirtualMachineInstanceMigration
		for _, item := range list.Items {
			if item.Spec.VMIName == name {
				mine = append(mine, item)
			}
		}
		if len(mine) != 1 {
			return fmt.Errorf("%d migrations of %s", len(mine), name)
		}
		m = &mine[0]
		if p := m.Status.Phase; p != v1.MigrationSucceeded && p != v1.MigrationFailed {
			return fmt.Errorf("phase %q, state %+v", p, m.Status.MigrationState)
		}
		return nil
	})
	return m
}

// migratableVM starts VM ns/name (the test guest, runStrategy Always, as
// change makes it) and returns it once its VMI runs with its agent and can
// live-migrate, with the guest's boot_id.
func migratableVM(t *testing.T, f *framework.Framework, c client.Client, ns, name string, change ...func(*v1.VirtualMachine)) (*v1.VirtualMachine, *v1.VirtualMachineInstance, string) {
	t.Helper()
	vm := framework.GuestVM(ns, name, framework.GuestImage, v1.RunStrategyAlways)
	for _, ch := range change {
		ch(vm)
	}
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, name, 3*time.Minute, "runs", framework.AgentConnected)
	vmi := framework.WaitVMI(t, c, ns, name, 30*time.Second, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
	return vm, vmi, guestBootID(t, f, vmi)
}

// dialMigrationPort connects to node's handler's migration port as any
// TLS client can (no client certificate), sends a migration stream's
// header and reads the answer.
func dialMigrationPort(t *testing.T, f *framework.Framework, node string) error {
	t.Helper()
	// Where the handler listens: its node's address (HOST_IP).
	addr := net.JoinHostPort(f.HandlerPod(t, node).Status.HostIP, "8187")
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // an attacker's client
	if err != nil {
		t.Logf("node %s: %v", node, err)
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(`{"key":"any","stream":"memory"}` + "\n")); err != nil {
		t.Logf("node %s: %v", node, err)
		return err
	}
	_, err = c.Read(make([]byte, 1))
	t.Logf("node %s: %v", node, err)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil // held open: let in
	}
	return err
}

// TestLiveMigration: `virtctl migrate` moves a running VM to the other node
// as KubeVirt's live migration does. The migration passes KubeVirt's
// phases to Succeeded (the controller's metrics count it); the VMI keeps
// its UID and its guest (same boot, a file written to its containerDisk
// and a pattern in its memory intact), now in a new launcher Pod on the
// other node, while the source Pod
// completes and one QEMU runs the domain; the guest keeps its masquerade
// address and is reached, and reaches out, at the new Pod's address. An
// editor of another namespace can neither migrate it, create a migration
// of it, nor make a MigrationPolicy that selects it, and a client without
// the handlers' certificate is refused at their migration port.
func TestLiveMigration(t *testing.T) {
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	vm, vmi, boot := migratableVM(t, f, c, ns, "mover")
	source, sourcePod := vmi.Status.NodeName, f.LauncherPod(t, vmi)
	before := guestShell(t, f, vmi, "echo kept-on-disk > /var/migration-marker && sync && "+
		"mkdir -p /mnt/mem && mount -t tmpfs tmpfs /mnt/mem && dd if=/dev/urandom of=/mnt/mem/pattern bs=1M count=32 2>/dev/null && "+
		"md5sum /mnt/mem/pattern && mkdir -p /tmp/www && hostname > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && echo serving")
	if !strings.Contains(before, "serving") {
		t.Fatalf("preparing the guest: %q", before)
	}
	pattern := strings.Fields(before)[0]

	// A tenant of another namespace may neither ask for the migration nor
	// create one.
	other := f.Namespace(t)
	tenant := userClient(t, f, other, "e2e-migration-tenant")
	if err := subresource(t, f, "e2e-migration-tenant", ns, vm.Name, "migrate", "{}"); !apierrors.IsForbidden(err) {
		t.Errorf("migrate by an editor of another namespace: %v, want 403", err)
	}
	theirs := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vm.Name}}
	if err := tenant.Create(ctx, theirs); !apierrors.IsForbidden(err) {
		t.Errorf("a migration created by an editor of another namespace: %v, want 403", err)
	}
	// Nor select it with a MigrationPolicy of theirs (cluster-scoped).
	slow := &migrationsv1alpha1.MigrationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant-" + other},
		Spec: migrationsv1alpha1.MigrationPolicySpec{Selectors: &migrationsv1alpha1.Selectors{NamespaceSelector: migrationsv1alpha1.LabelSelector{"kubernetes.io/metadata.name": ns}}}}
	if err := tenant.Create(ctx, slow); !apierrors.IsForbidden(err) {
		t.Errorf("a MigrationPolicy created by a namespace editor: %v, want 403", err)
	}

	// Nor may anything but a handler join a migration: the handlers'
	// migration port asks for their certificate.
	for _, node := range f.Nodes(t) {
		if err := dialMigrationPort(t, f, node); err == nil {
			t.Errorf("a TLS client without the handlers' certificate was let in to node %s's migration port", node)
		}
	}

	start := time.Now()
	out := virtctl(t, "migrate", vm.Name, "-n", ns)
	if !strings.Contains(out, "VM mover was scheduled to migrate") {
		t.Errorf("virtctl migrate said %q", out)
	}
	m := waitMigration(t, c, ns, vm.Name, 5*time.Minute)
	t.Logf("migration %s: %s in %s", m.Name, m.Status.Phase, time.Since(start).Round(100*time.Millisecond))
	if m.Status.Phase != v1.MigrationSucceeded {
		t.Fatalf("migration %s %s: %+v", m.Name, m.Status.Phase, m.Status.MigrationState)
	}
	reader := metricsReader(t, f, ns)
	framework.Eventually(t, 30*time.Second, "the migration in the controller's metrics", func() error {
		code, body := scrapeController(t, f, reader)
		for _, series := range []string{
			fmt.Sprintf(`kubevirt_vmi_migration_succeeded{namespace="%s",vmi="%s",vmim="%s"} 1`, ns, vm.Name, m.Name),
			`kubevirt_vmi_migration_phase_transition_time_from_creation_seconds_count{phase="Succeeded"} `,
		} {
			if code != http.StatusOK || !strings.Contains(body, "\n"+series) {
				return fmt.Errorf("scrape %d: no %s", code, series)
			}
		}
		return nil
	})
	var phases []string
	for _, p := range m.Status.PhaseTransitionTimestamps {
		phases = append(phases, string(p.Phase))
	}
	if got := strings.Join(phases, " "); got != "Pending Scheduling Scheduled PreparingTarget TargetReady Running Succeeded" {
		t.Errorf("migration phases %q", got)
	}

	moved := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "reported on its new node", func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName == source || got.Labels[v1.NodeNameLabel] != got.Status.NodeName {
			return fmt.Errorf("node %q, label %q", got.Status.NodeName, got.Labels[v1.NodeNameLabel])
		}
		// The target's handler reports the new Pod's address a moment
		// after it took the VMI over.
		if ifs := got.Status.Interfaces; len(ifs) != 1 || ifs[0].IP == "" || ifs[0].IP == sourcePod.Status.PodIP {
			return fmt.Errorf("interfaces %+v, still the source Pod's address %s", ifs, sourcePod.Status.PodIP)
		}
		return framework.AgentConnected(got)
	})
	ms := moved.Status.MigrationState
	switch {
	case moved.UID != vmi.UID:
		t.Errorf("the VMI's UID changed: %s, was %s", moved.UID, vmi.UID)
	case ms == nil || !ms.Completed || ms.Failed || ms.SourceNode != source || ms.TargetNode != moved.Status.NodeName ||
		ms.StartTimestamp == nil || ms.EndTimestamp == nil || ms.MigrationUID != m.UID:
		t.Errorf("migration state %+v", ms)
	case moved.Status.MigrationMethod != v1.BlockMigration:
		t.Errorf("migration method %q, want %q (a containerDisk)", moved.Status.MigrationMethod, v1.BlockMigration)
	}
	targetPod := f.LauncherPod(t, moved)
	if targetPod.Spec.NodeName != moved.Status.NodeName || targetPod.UID == sourcePod.UID {
		t.Errorf("the VMI's launcher Pod is %s on %s; it was %s on %s", targetPod.Name, targetPod.Spec.NodeName, sourcePod.Name, source)
	}
	framework.Eventually(t, time.Minute, "the source launcher Pod completed", func() error {
		p, err := f.Kube.CoreV1().Pods(ns).Get(ctx, sourcePod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if n := framework.QEMUCount(domain.Name(vmi)); n != 1 {
		t.Errorf("%d QEMUs run the domain, want 1", n)
	}

	if got := guestBootID(t, f, moved); got != boot {
		t.Errorf("the guest booted again: boot_id %s, was %s", got, boot)
	}
	after := guestShell(t, f, moved, "cat /var/migration-marker; md5sum /mnt/mem/pattern; ip -4 addr show eth0")
	t.Logf("from %s to %s (Pod %s, %s); the guest after it:\n%s", source, moved.Status.NodeName, targetPod.Name, targetPod.Status.PodIP, after)
	for _, want := range []string{"kept-on-disk", pattern, "inet 10.0.2.2/24"} {
		if !strings.Contains(after, want) {
			t.Errorf("the guest after its migration: want %q in %q", want, after)
		}
	}
	if ifs := moved.Status.Interfaces; len(ifs) != 1 || ifs[0].IP != targetPod.Status.PodIP {
		t.Errorf("VMI interfaces %+v, want the new Pod's address %s", ifs, targetPod.Status.PodIP)
	}

	// A Pod on the source node reaches the guest at its new Pod's address,
	// and the guest reaches the Pod from there.
	client, logs := webClientPod(t, f, ns, source, fmt.Sprintf(`body=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 %s 8080 2>/dev/null | tail -n 1)
echo "guest: ${body:-unreachable}"; sleep 300`, targetPod.Status.PodIP))
	framework.Eventually(t, time.Minute, "the Pod asked the guest", func() error {
		if !strings.Contains(logs(), "guest: ") {
			return fmt.Errorf("logs %q", logs())
		}
		return nil
	})
	if !strings.Contains(logs(), "guest: mover") {
		t.Errorf("a Pod asking the migrated guest at %s: %q", targetPod.Status.PodIP, logs())
	}
	clientPod, err := f.Kube.CoreV1().Pods(ns).Get(ctx, client.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := guestShell(t, f, moved, `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+clientPod.Status.PodIP+" 8081"); !strings.Contains(got, "from-a-pod") {
		t.Errorf("the migrated guest did not reach the Pod at %s: %q", clientPod.Status.PodIP, got)
	}
}

// TestMigrationUnschedulableCancelled: a migration whose target cannot be
// placed (virtctl migrate --addedNodeSelector matching no node) waits in
// Scheduling with kube-scheduler's message as an event on it; virtctl
// migrate-cancel ends it: the migration goes, its target Pod with it, and
// the VM runs on where it was, untouched.
func TestMigrationUnschedulableCancelled(t *testing.T) {
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	vm, vmi, boot := migratableVM(t, f, c, ns, "stays")

	virtctl(t, "migrate", vm.Name, "-n", ns, "--addedNodeSelector=kubernetes.io/hostname=nowhere")
	var m v1.VirtualMachineInstanceMigration
	framework.Eventually(t, 2*time.Minute, "the migration waits for its target with the scheduler's message", func() error {
		list := &v1.VirtualMachineInstanceMigrationList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d migrations", len(list.Items))
		}
		m = list.Items[0]
		if m.Status.Phase != v1.MigrationScheduling {
			return fmt.Errorf("phase %q", m.Status.Phase)
		}
		events, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + m.Name + ",reason=MigrationPending"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "didn't match Pod's node affinity/selector") {
				return nil
			}
		}
		return fmt.Errorf("no event with the scheduler's message: %+v", events.Items)
	})
	pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: v1.MigrationJobLabel + "=" + string(m.UID)})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Spec.NodeSelector["kubernetes.io/hostname"] != "nowhere" {
		t.Fatalf("the migration's target Pod: %v %v", pods, err)
	}

	if out := virtctl(t, "migrate-cancel", vm.Name, "-n", ns); !strings.Contains(out, "was scheduled to migrate-cancel") {
		t.Errorf("virtctl migrate-cancel said %q", out)
	}
	framework.WaitGone(t, c, &m, time.Minute)
	framework.Eventually(t, time.Minute, "the target Pod gone", func() error {
		_, err := f.Kube.CoreV1().Pods(ns).Get(ctx, pods.Items[0].Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
	after := framework.WaitVMI(t, c, ns, vm.Name, 30*time.Second, "running where it was", func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName != vmi.Status.NodeName || got.Status.Phase != v1.Running || got.Labels[v1.MigrationTargetNodeNameLabel] != "" {
			return fmt.Errorf("on %q, %s, labels %v", got.Status.NodeName, got.Status.Phase, got.Labels)
		}
		return nil
	})
	if after.UID != vmi.UID || guestBootID(t, f, after) != boot {
		t.Errorf("the VM did not run on untouched: UID %s (was %s)", after.UID, vmi.UID)
	}
}
