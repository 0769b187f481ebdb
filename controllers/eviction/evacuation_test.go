package eviction

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestEvacuation: a LiveMigrate VMI marked for evacuation gets one
// evacuation migration at a time, another only RetryAfter after one
// failed, and its mark cleared once it runs on another node; an External
// VMI's evacuation is its owner's.
func TestEvacuation(t *testing.T) {
	crd := filepath.Join("..", "config", "crd")
	cfg := testenv.Start(t, filepath.Join(crd, "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(crd, "kubevirt.io_virtualmachineinstancemigrations.yaml"), filepath.Join(crd, "hco.kubevirt.io_hyperconvergeds.yaml"))
	c := testenv.Client(t, cfg, clientgoscheme.AddToScheme, v1.AddToScheme, hcov1beta1.AddToScheme)
	ctx := context.Background()
	now := time.Now()
	for _, name := range []string{"live", "external"} {
		strategy := v1.EvictionStrategyLiveMigrate
		if name == "external" {
			strategy = v1.EvictionStrategyExternal
		}
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.VirtualMachineInstanceSpec{EvictionStrategy: &strategy, Domain: v1.DomainSpec{Devices: v1.Devices{}}}}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node1", EvacuationNodeName: "node1",
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}}
		if err := c.Status().Update(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	r := &EvacuationReconciler{Client: c, Now: func() time.Time { return now }}
	reconcile := func(name string) ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	migrations := func() []v1.VirtualMachineInstanceMigration {
		t.Helper()
		list := &v1.VirtualMachineInstanceMigrationList{}
		if err := c.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	end := func(m v1.VirtualMachineInstanceMigration, phase v1.VirtualMachineInstanceMigrationPhase) {
		t.Helper()
		m.Status.Phase = phase
		if err := c.Status().Update(ctx, &m); err != nil {
			t.Fatal(err)
		}
	}

	reconcile("external")
	reconcile("live")
	reconcile("live")
	ms := migrations()
	if len(ms) != 1 || ms[0].Spec.VMIName != "live" || ms[0].Annotations[v1.EvacuationMigrationAnnotation] != "node1" || ms[0].Labels[v1.MigrationSelectorLabel] != "live" {
		t.Fatalf("want one evacuation migration of live (none of external): %+v", ms)
	}

	// The migration fails: another waits RetryAfter from its creation.
	end(ms[0], v1.MigrationFailed)
	now = ms[0].CreationTimestamp.Time
	if res := reconcile("live"); res.RequeueAfter <= 0 || res.RequeueAfter > RetryAfter || len(migrations()) != 1 {
		t.Fatalf("right after a failed evacuation: requeue %s, %d migrations", res.RequeueAfter, len(migrations()))
	}
	now = now.Add(RetryAfter)
	reconcile("live")
	if ms = migrations(); len(ms) != 2 {
		t.Fatalf("after RetryAfter: %d migrations, want another", len(ms))
	}

	// It succeeds: the VMI runs on node2, and its mark goes.
	for _, m := range ms {
		if m.Status.Phase == "" {
			end(m, v1.MigrationSucceeded)
		}
	}
	got := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "live"}, got); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Patch(ctx, got, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"nodeName":"node2"}}`))); err != nil {
		t.Fatal(err)
	}
	reconcile("live")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "live"}, got); err != nil || got.Status.EvacuationNodeName != "" || len(migrations()) != 2 {
		t.Errorf("evacuated: mark %q (%v), %d migrations", got.Status.EvacuationNodeName, err, len(migrations()))
	}
}
