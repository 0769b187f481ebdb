package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/nodepool"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// sharedPoolMigrates: a NodePool whose root volumes are of the
// tekvirt-shared class gets workers with no eviction strategy of their own,
// so the infrastructure's (LiveMigrate, the HyperConverged's default on the
// two-node testbed) applies: `kubectl drain` of the infrastructure node
// under its worker migrates the worker (same VMI, same boot), its hosted
// node stays Ready and a Pod on it runs on without a restart, no worker is
// replaced, and the drain completes.
func sharedPoolMigrates(t *testing.T, f *framework.Framework, c client.Client, hosted kubernetes.Interface, np *hyperv1.NodePool, cpNS string) {
	t.Helper()
	ctx := context.Background()
	// Both infrastructure nodes schedulable: the worker needs somewhere to go
	// (evacuation's drain keeps its node cordoned until the test ends).
	for _, n := range f.Nodes(t) {
		if out, err := run(f, f.Bin("kubectl"), "uncordon", n); err != nil {
			t.Fatalf("uncordon %s: %v %s", n, err, out)
		}
	}
	shared := np.DeepCopy()
	shared.ObjectMeta = metav1.ObjectMeta{Namespace: np.Namespace, Name: "shared"}
	shared.Spec.Replicas, shared.Spec.AutoScaling = ptr(int32(1)), nil
	kv := shared.Spec.Platform.Kubevirt
	kv.KubevirtHostDevices = nil
	if kv.RootVolume == nil || kv.RootVolume.Persistent == nil {
		t.Fatalf("pool %s has no persistent root volume to change: %+v", np.Name, kv.RootVolume)
	}
	kv.RootVolume.Persistent.StorageClass = ptr("tekvirt-shared")
	shared.Status = hyperv1.NodePoolStatus{}
	if err := c.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitPool(t, c, shared, 1, 8*time.Minute)
	t.Logf("shared pool Ready with 1 node: %s", time.Since(start).Round(time.Second))
	workers := poolWorkers(t, c, cpNS, shared.Name)
	if len(workers) != 1 {
		t.Fatalf("shared pool workers %v, want 1", workers)
	}
	worker := workers[0]
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: worker}, vm); err != nil {
		t.Fatal(err)
	}
	if es := vm.Spec.Template.Spec.EvictionStrategy; es != nil {
		t.Errorf("shared worker %s has evictionStrategy %s, want none (the infrastructure's)", worker, *es)
	}
	vmi := framework.WaitVMI(t, c, cpNS, worker, time.Minute, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
	infra := vmi.Status.NodeName
	node, err := hosted.CoreV1().Nodes().Get(ctx, worker, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	boot := node.Status.NodeInfo.BootID
	runPause(t, hosted, "on-shared", worker)
	before, err := hosted.CoreV1().Pods("default").Get(ctx, "on-shared", metav1.GetOptions{})
	if err != nil || len(before.Status.ContainerStatuses) != 1 || before.Status.ContainerStatuses[0].State.Running == nil {
		t.Fatalf("hosted Pod on-shared: %v %+v", err, before)
	}

	t.Cleanup(func() {
		if out, err := run(f, f.Bin("kubectl"), "uncordon", infra); err != nil {
			t.Logf("uncordon %s: %v %s", infra, err, out)
		}
	})
	start = time.Now()
	out, err := run(f, f.Bin("kubectl"), "drain", infra, "--pod-selector=kubevirt.io=virt-launcher,"+nodepool.PoolLabel+"="+shared.Name,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=6m")
	if err != nil {
		t.Fatalf("kubectl drain %s: %v\n%s", infra, err, out)
	}
	t.Logf("kubectl drain %s (shared worker %s on it) completed in %s", infra, worker, time.Since(start).Round(time.Second))

	moved := framework.WaitVMI(t, c, cpNS, worker, time.Minute, "migrated off "+infra, func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName == infra {
			return fmt.Errorf("still on %s", infra)
		}
		if ms := got.Status.MigrationState; ms == nil || !ms.Completed || ms.SourceNode != infra {
			return fmt.Errorf("migration state %+v", ms)
		}
		return nil
	})
	if moved.UID != vmi.UID {
		t.Errorf("worker %s's VMI was replaced (UID %s, was %s), not migrated", worker, moved.UID, vmi.UID)
	}
	if got := poolWorkers(t, c, cpNS, shared.Name); !slices.Equal(got, workers) {
		t.Errorf("shared pool workers %v after the drain, want %v (none replaced)", got, workers)
	}
	n, err := hosted.CoreV1().Nodes().Get(ctx, worker, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.NodeInfo.BootID != boot {
		t.Errorf("hosted node %s booted again (boot ID %s, was %s)", worker, n.Status.NodeInfo.BootID, boot)
	}
	if nodes, err := readyNodes(ctx, hosted); err != nil || !slices.Contains(nodes, worker) {
		t.Errorf("hosted node %s not Ready after its migration: Ready %v (%v)", worker, nodes, err)
	}
	after, err := hosted.CoreV1().Pods("default").Get(ctx, "on-shared", metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("hosted Pod on-shared after the drain: %v", err)
	case after.UID != before.UID || after.Status.Phase != corev1.PodRunning || after.Status.ContainerStatuses[0].RestartCount != 0 ||
		after.Status.ContainerStatuses[0].State.Running == nil ||
		!after.Status.ContainerStatuses[0].State.Running.StartedAt.Equal(&before.Status.ContainerStatuses[0].State.Running.StartedAt):
		t.Errorf("hosted Pod on-shared did not run on: %s %+v, was started %s", after.Status.Phase, after.Status.ContainerStatuses, before.Status.ContainerStatuses[0].State.Running.StartedAt)
	}
	t.Logf("worker %s: %s -> %s, same VMI and boot, Pod on-shared running since %s", worker, infra, moved.Status.NodeName, before.Status.ContainerStatuses[0].State.Running.StartedAt)

	if err := c.Delete(ctx, shared); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, vm, 3*time.Minute)
}
