package migration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestReconcilerOnAPIServer drives one migration on a real API server,
// playing kube-scheduler, the kubelet and the two handlers: the target Pod
// is made, the VMI handed off (migration state, active Pods, the target
// node's label, the options of the MigrationPolicy that selects the VMI),
// the phases follow the handlers' reports, and the
// migration succeeds only once the target's handler took the VMI over;
// then the VMI's migration bookkeeping is cleared and the finalizer goes.
func TestReconcilerOnAPIServer(t *testing.T) {
	c := startAPIServer(t)
	ctx := context.Background()
	bw := resource.MustParse("8Mi")
	for _, p := range []*migrationsv1alpha1.MigrationPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Spec: migrationsv1alpha1.MigrationPolicySpec{BandwidthPerMigration: &bw,
			Selectors: &migrationsv1alpha1.Selectors{VirtualMachineInstanceSelector: migrationsv1alpha1.LabelSelector{"tier": "gold"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "silver"}, Spec: migrationsv1alpha1.MigrationPolicySpec{AllowPostCopy: ptr.To(true),
			Selectors: &migrationsv1alpha1.Selectors{VirtualMachineInstanceSelector: migrationsv1alpha1.LabelSelector{"tier": "silver"}}}},
	} {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm", Labels: map[string]string{"tier": "gold"}},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node1", ActivePods: map[types.UID]string{"source-uid": "node1"},
		Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	m := &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, LauncherImage: "reg/launcher:1"}
	step := func(want v1.VirtualMachineInstanceMigrationPhase) *v1.VirtualMachineInstanceMigration {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(m)}); err != nil {
			t.Fatal(err)
		}
		got := &v1.VirtualMachineInstanceMigration{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != want {
			t.Fatalf("phase %q, want %q", got.Status.Phase, want)
		}
		return got
	}
	handler := func(f func(*v1.VirtualMachineInstanceMigrationState, *v1.VirtualMachineInstanceStatus)) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			t.Fatal(err)
		}
		f(vmi.Status.MigrationState, &vmi.Status)
		if err := c.Status().Update(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}

	got := step(v1.MigrationScheduling)
	if got.Labels[v1.MigrationSelectorLabel] != "vm" || len(got.Finalizers) != 1 {
		t.Errorf("labels %v, finalizers %v", got.Labels, got.Finalizers)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.MatchingLabels{v1.MigrationJobLabel: string(got.UID)}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("target Pods: %v %v", pods.Items, err)
	}
	target := &pods.Items[0]
	// kube-scheduler binds it to node2; the kubelet runs it.
	if err := c.SubResource("binding").Create(ctx, target, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: target.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node2"}}); err != nil {
		t.Fatal(err)
	}
	// Handed to the handlers once bound: the target's prepares the Pod
	// while the kubelet starts it.
	step(v1.MigrationScheduled)
	if err := c.Get(ctx, client.ObjectKeyFromObject(target), target); err != nil {
		t.Fatal(err)
	}
	target.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, target); err != nil {
		t.Fatal(err)
	}

	step(v1.MigrationPreparingTarget)
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
		t.Fatal(err)
	}
	ms := vmi.Status.MigrationState
	if ms == nil || ms.SourceNode != "node1" || ms.TargetNode != "node2" || ms.TargetPod != target.Name || ms.MigrationUID != got.UID ||
		vmi.Status.ActivePods[target.UID] != "node2" || vmi.Labels[v1.MigrationTargetNodeNameLabel] != "node2" ||
		ms.VMIMConfigurationOptions == nil || *ms.VMIMConfigurationOptions.ProgressTimeout != ProgressTimeout ||
		ptr.Deref(ms.MigrationPolicyName, "") != "gold" || ms.VMIMConfigurationOptions.BandwidthPerMigration.Value() != 8<<20 ||
		*ms.VMIMConfigurationOptions.AllowPostCopy {
		t.Fatalf("hand-off: state %+v, active %v, labels %v", ms, vmi.Status.ActivePods, vmi.Labels)
	}

	handler(func(ms *v1.VirtualMachineInstanceMigrationState, _ *v1.VirtualMachineInstanceStatus) {
		ms.TargetNodeAddress = "192.0.2.3:8187"
	})
	step(v1.MigrationTargetReady)
	handler(func(ms *v1.VirtualMachineInstanceMigrationState, _ *v1.VirtualMachineInstanceStatus) {
		ms.StartTimestamp = ptrNow()
	})
	step(v1.MigrationRunning)
	handler(func(ms *v1.VirtualMachineInstanceMigrationState, _ *v1.VirtualMachineInstanceStatus) {
		ms.Completed, ms.EndTimestamp = true, ptrNow()
	})
	step(v1.MigrationRunning) // the target's handler has not taken it over yet
	handler(func(ms *v1.VirtualMachineInstanceMigrationState, st *v1.VirtualMachineInstanceStatus) {
		ms.TargetNodeDomainDetected, st.NodeName = true, "node2"
	})
	got = step(v1.MigrationSucceeded)
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
		t.Fatal(err)
	}
	if len(vmi.Status.ActivePods) != 1 || vmi.Status.ActivePods[target.UID] != "node2" || vmi.Labels[v1.MigrationTargetNodeNameLabel] != "" || len(got.Finalizers) != 0 {
		t.Errorf("after success: active %v, labels %v, finalizers %v", vmi.Status.ActivePods, vmi.Labels, got.Finalizers)
	}
	if got.Status.MigrationState == nil || !got.Status.MigrationState.Completed {
		t.Errorf("the migration's copy of the state: %+v", got.Status.MigrationState)
	}

	// A migration whose target Pod goes away after the hand-off, before
	// the source started: failed, and the VMI says so, so that it may
	// migrate again (no handler is there to say it).
	m = &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m2"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	got = step(v1.MigrationScheduling)
	if err := c.List(ctx, pods, client.MatchingLabels{v1.MigrationJobLabel: string(got.UID)}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("target Pods: %v %v", pods.Items, err)
	}
	target = &pods.Items[0]
	if err := c.SubResource("binding").Create(ctx, target, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: target.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node1"}}); err != nil {
		t.Fatal(err)
	}
	step(v1.MigrationScheduled)
	if err := c.Delete(ctx, target, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	got = step(v1.MigrationFailed)
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
		t.Fatal(err)
	}
	if ms := vmi.Status.MigrationState; ms == nil || ms.MigrationUID != got.UID || !ms.Failed || !strings.Contains(ms.FailureReason, "ended before the migration started") ||
		ms.EndTimestamp == nil || vmi.Labels[v1.MigrationTargetNodeNameLabel] != "" || vmi.Status.ActivePods[target.UID] != "" {
		t.Errorf("after the target Pod went: state %+v, active %v, labels %v", ms, vmi.Status.ActivePods, vmi.Labels)
	}
	m = &v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "m3"}, Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"}}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	step(v1.MigrationScheduling)
}

// startAPIServer starts an API server with the CRDs the reconciler reads
// and returns a client of it.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	crd := filepath.Join("..", "config", "crd")
	cfg := testenv.Start(t, filepath.Join(crd, "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(crd, "kubevirt.io_virtualmachineinstancemigrations.yaml"), filepath.Join(crd, "hco.kubevirt.io_hyperconvergeds.yaml"),
		filepath.Join(crd, "migrations.kubevirt.io_migrationpolicies.yaml"))
	return testenv.Client(t, cfg, clientgoscheme.AddToScheme, v1.AddToScheme, hcov1beta1.AddToScheme, migrationsv1alpha1.AddToScheme)
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
}
