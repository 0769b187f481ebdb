package migration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

func TestCollectable(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	mig := func(name string, age time.Duration, phase v1.VirtualMachineInstanceMigrationPhase) v1.VirtualMachineInstanceMigration {
		return v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
			Status: v1.VirtualMachineInstanceMigrationStatus{Phase: phase}}
	}
	deleting := func(m v1.VirtualMachineInstanceMigration) v1.VirtualMachineInstanceMigration {
		m.DeletionTimestamp = &metav1.Time{Time: t0}
		return m
	}
	for name, tc := range map[string]struct {
		in   []v1.VirtualMachineInstanceMigration
		want []string
	}{
		"none": {},
		"five ended: all kept": {in: []v1.VirtualMachineInstanceMigration{mig("a", 5, v1.MigrationSucceeded), mig("b", 4, v1.MigrationFailed),
			mig("c", 3, v1.MigrationSucceeded), mig("d", 2, v1.MigrationSucceeded), mig("e", 1, v1.MigrationSucceeded)}},
		"seven ended: the two oldest, whatever the order": {in: []v1.VirtualMachineInstanceMigration{mig("new", 1, v1.MigrationSucceeded),
			mig("oldest", 7*time.Hour, v1.MigrationFailed), mig("c", 3, v1.MigrationSucceeded), mig("d", 4, v1.MigrationSucceeded),
			mig("e", 5, v1.MigrationSucceeded), mig("old", 6*time.Hour, v1.MigrationSucceeded), mig("f", 2, v1.MigrationFailed)},
			want: []string{"oldest", "old"}},
		"running ones neither counted nor collected": {in: []v1.VirtualMachineInstanceMigration{mig("run", 9*time.Hour, v1.MigrationRunning),
			mig("pend", 8*time.Hour, v1.MigrationPending), mig("a", 6, v1.MigrationSucceeded), mig("b", 5, v1.MigrationSucceeded),
			mig("c", 4, v1.MigrationSucceeded), mig("d", 3, v1.MigrationSucceeded), mig("e", 2, v1.MigrationSucceeded)}},
		"one being deleted already not counted": {in: []v1.VirtualMachineInstanceMigration{deleting(mig("gone", 9, v1.MigrationSucceeded)),
			mig("a", 6, v1.MigrationSucceeded), mig("b", 5, v1.MigrationSucceeded), mig("c", 4, v1.MigrationSucceeded),
			mig("d", 3, v1.MigrationSucceeded), mig("e", 2, v1.MigrationSucceeded), mig("f", 1, v1.MigrationSucceeded)},
			want: []string{"a"}},
		"same second: by name": {in: []v1.VirtualMachineInstanceMigration{mig("m-6", 0, v1.MigrationSucceeded), mig("m-5", 0, v1.MigrationSucceeded),
			mig("m-4", 0, v1.MigrationSucceeded), mig("m-3", 0, v1.MigrationSucceeded), mig("m-2", 0, v1.MigrationSucceeded),
			mig("m-1", 0, v1.MigrationSucceeded), mig("m-0", 0, v1.MigrationSucceeded)},
			want: []string{"m-0", "m-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, m := range Collectable(tc.in) {
				got = append(got, m.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("collected %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCollectOnAPIServer: a VMI keeps its newest five ended migrations, as
// in KubeVirt, and the migrations of a deleted VMI go with it, the one
// that had not ended included (cancelled through its finalizer); another
// VMI's migrations are not touched.
func TestCollectOnAPIServer(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()
	r := &Reconciler{Client: c, Reader: c, LauncherImage: "reg/launcher:1"}
	reconcile := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(vmi string) []string {
		t.Helper()
		list := &v1.VirtualMachineInstanceMigrationList{}
		if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range list.Items {
			if m.Spec.VMIName == vmi {
				out = append(out, m.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, name := range []string{"vm", "other"} {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node1",
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}}
		if err := c.Status().Update(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	ended := func(name, vmi string) {
		t.Helper()
		m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Labels: map[string]string{v1.MigrationSelectorLabel: vmi}}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vmi}}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status.Phase = v1.MigrationSucceeded
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		ended(fmt.Sprintf("m-%d", i), "vm")
		ended(fmt.Sprintf("o-%d", i), "other")
	}
	reconcile("m-6")
	if got, want := names("vm"), []string{"m-2", "m-3", "m-4", "m-5", "m-6"}; !slices.Equal(got, want) {
		t.Errorf("vm's migrations after one ended: %v, want the newest five %v", got, want)
	}
	if got := names("other"); len(got) != 7 {
		t.Errorf("another VMI's migrations collected: %v", got)
	}

	// One in flight (its target Pod made), then the VMI is deleted.
	live := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m-live"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	if err := c.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	reconcile("m-live")
	if err := c.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil || live.Status.Phase != v1.MigrationScheduling {
		t.Fatalf("in-flight migration: phase %q, %v", live.Status.Phase, err)
	}
	if err := c.Delete(ctx, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm"}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names("vm") {
		reconcile(name)
	}
	reconcile("m-live") // deleted: its finalizer's turn
	if got := names("vm"); len(got) != 0 {
		t.Errorf("migrations of the deleted VMI left: %v", got)
	}
	if got := names("other"); len(got) != 7 {
		t.Errorf("another VMI's migrations touched: %v", got)
	}
}
