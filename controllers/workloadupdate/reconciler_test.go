package workloadupdate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/testenv"
	vmictrl "github.com/tekvirt/tekvirt/controllers/vmi"
)

// TestReconcilerOnAPIServer: nothing moves while the node handlers roll
// out; then, of two running VMIs, the one whose launcher
// Pod runs an old image is labelled outdated and, migratable, gets a
// workload-update migration; the current one is left alone. With Evict
// only, a VMI's outdated launcher Pod is evicted.
func TestReconcilerOnAPIServer(t *testing.T) {
	crd := filepath.Join("..", "config", "crd")
	cfg := testenv.Start(t, filepath.Join(crd, "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(crd, "kubevirt.io_virtualmachineinstancemigrations.yaml"), filepath.Join(crd, "hco.kubevirt.io_hyperconvergeds.yaml"))
	c := testenv.Client(t, cfg, clientgoscheme.AddToScheme, v1.AddToScheme, hcov1beta1.AddToScheme)
	ctx := context.Background()
	running := func(name, image string) *v1.VirtualMachineInstance {
		t.Helper()
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "virt-launcher-" + name, Labels: map[string]string{vmictrl.CreatedByLabel: string(vmi.UID)}},
			Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: launcherpod.ComputeContainer, Image: image}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodRunning
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running, NodeName: "node1", ActivePods: map[types.UID]string{pod.UID: "node1"},
			Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}}}
		if err := c.Status().Update(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		return vmi
	}
	old, current := running("old", "reg/launcher@sha256:1"), running("current", "reg/launcher@sha256:2")
	r := &Reconciler{Client: c, Reader: c, LauncherImage: "reg/launcher@sha256:2"}

	// While the node handlers roll out, nothing moves.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: config.NodeNamespace}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "handler"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: config.NodeNamespace, Name: config.HandlerDaemonSet},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "handler", Image: "reg/handler:2"}}}}}}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 1, NumberUnavailable: 1}
	if err := c.Status().Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Reconcile(ctx, everything); err != nil || res.RequeueAfter == 0 {
		t.Fatalf("while the handlers roll out: %+v %v", res, err)
	}
	var migrations v1.VirtualMachineInstanceMigrationList
	if err := c.List(ctx, &migrations); err != nil || len(migrations.Items) != 0 {
		t.Fatalf("migrations while the handlers roll out: %+v %v", migrations.Items, err)
	}
	ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable, ds.Status.NumberUnavailable = 2, 2, 0
	if err := c.Status().Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, everything); err != nil {
		t.Fatal(err)
	}
	for vmi, want := range map[*v1.VirtualMachineInstance]bool{old: true, current: false} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			t.Fatal(err)
		}
		if _, got := vmi.Labels[v1.OutdatedLauncherImageLabel]; got != want {
			t.Errorf("%s labelled outdated: %v, want %v", vmi.Name, got, want)
		}
	}
	if err := c.List(ctx, &migrations); err != nil {
		t.Fatal(err)
	}
	if len(migrations.Items) != 1 || migrations.Items[0].Spec.VMIName != "old" || !strings.HasPrefix(migrations.Items[0].Name, MigrationPrefix) {
		t.Fatalf("migrations: %+v", migrations.Items)
	}
	if _, ok := migrations.Items[0].Annotations[v1.WorkloadUpdateMigrationAnnotation]; !ok {
		t.Errorf("the migration is not marked as a workload update's: %v", migrations.Items[0].Annotations)
	}
	// A second look while it runs makes no second migration.
	if _, err := r.Reconcile(ctx, everything); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &migrations); err != nil || len(migrations.Items) != 1 {
		t.Fatalf("migrations after a second look: %d %v", len(migrations.Items), err)
	}

	// Evict only: the old launcher Pod is evicted.
	if err := c.Delete(ctx, &migrations.Items[0]); err != nil {
		t.Fatal(err)
	}
	hc := &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubevirt-hyperconverged"},
		Spec: hcov1beta1.HyperConvergedSpec{WorkloadUpdateStrategy: hcov1beta1.HyperConvergedWorkloadUpdateStrategy{WorkloadUpdateMethods: []string{"Evict"}, BatchEvictionSize: ptr.To(5)}}}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, everything); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "virt-launcher-old"}, pod)
	if !apierrors.IsNotFound(err) && (err != nil || pod.DeletionTimestamp == nil) {
		t.Errorf("the outdated launcher Pod was not evicted: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "virt-launcher-current"}, pod); err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("the current launcher Pod was touched: %v", err)
	}
}
