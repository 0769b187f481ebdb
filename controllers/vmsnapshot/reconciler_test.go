package vmsnapshot

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// guest is a Guest that records what it was asked.
type guest struct{ calls []string }

func (g *guest) Freeze(_ context.Context, vmi *v1.VirtualMachineInstance, after time.Duration) error {
	g.calls = append(g.calls, "freeze "+vmi.Name+" "+after.String())
	return nil
}

func (g *guest) Unfreeze(_ context.Context, vmi *v1.VirtualMachineInstance) error {
	g.calls = append(g.calls, "thaw "+vmi.Name)
	return nil
}

// TestSnapshotAndRestoreOnAPIServer takes a snapshot of a running VM and
// restores it twice on a real API server, playing the CSI snapshotter and
// the VM controller: the VM is locked, the content and VolumeSnapshot made
// with the guest frozen, thawed once the volume snapshot is cut, the
// snapshot Succeeded and the VM unlocked; a restore into a new VM creates it
// stopped with the restore's requester and a claim of the snapshot; a
// restore into the running VM waits for it to stop, then renames its
// volume; deleting the snapshot deletes its content.
func TestSnapshotAndRestoreOnAPIServer(t *testing.T) {
	crd := filepath.Join("..", "config", "crd")
	cfg := testenv.Start(t, filepath.Join(crd, "kubevirt.io_virtualmachines.yaml"), filepath.Join(crd, "kubevirt.io_virtualmachineinstances.yaml"),
		filepath.Join(crd, "cdi.kubevirt.io_datavolumes.yaml"),
		filepath.Join(crd, "snapshot.kubevirt.io_virtualmachinesnapshots.yaml"), filepath.Join(crd, "snapshot.kubevirt.io_virtualmachinesnapshotcontents.yaml"),
		filepath.Join(crd, "snapshot.kubevirt.io_virtualmachinerestores.yaml"),
		filepath.Join(crd, "snapshot.storage.k8s.io_volumesnapshots.yaml"), filepath.Join(crd, "snapshot.storage.k8s.io_volumesnapshotclasses.yaml"))
	c := testenv.Client(t, cfg, clientgoscheme.AddToScheme, v1.AddToScheme, cdiv1.AddToScheme, snapshotv1.AddToScheme, vsv1.AddToScheme)
	ctx := context.Background()
	create := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	get := func(o client.Object) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
	}
	create(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: "local.csi"},
		&vsv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "snaps"}, Driver: "local.csi", DeletionPolicy: vsv1.VolumeSnapshotContentDelete})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("local"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	create(pvc)
	pvc.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm"},
		Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(v1.RunStrategyAlways), Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{Devices: v1.Devices{Disks: []v1.Disk{{Name: "data"}}}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
		}}}}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm"}, Spec: vm.Spec.Template.Spec}
	create(vm, vmi)
	vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Running,
		Conditions: []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}

	g := &guest{}
	sr := &SnapshotReconciler{Client: c, Guest: g}
	snap := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm"}}}
	create(snap)
	reconcileSnapshot := func() {
		t.Helper()
		if _, err := sr.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(snap)}); err != nil {
			t.Fatal(err)
		}
		get(snap)
	}
	reconcileSnapshot()
	get(vm)
	if ptr.Deref(vm.Status.SnapshotInProgress, "") != "s" {
		t.Fatalf("VM not locked: %v", vm.Status.SnapshotInProgress)
	}
	vs := &vsv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vmsnapshot-" + string(snap.UID) + "-volume-data"}}
	get(vs)
	if !slices.Equal(g.calls, []string{"freeze vm 5m0s"}) {
		t.Fatalf("guest calls %v, want one freeze bounded by the deadline", g.calls)
	}
	if snap.Status.Phase != snapshotv1.InProgress || len(snap.Status.SourceIndications) != 2 {
		t.Fatalf("snapshot %+v", snap.Status)
	}
	reconcileSnapshot()
	if len(g.calls) != 1 {
		t.Fatalf("guest calls %v before the volume snapshot is cut, want just the freeze", g.calls)
	}

	// The snapshotter cuts it.
	now := metav1.Now()
	vs.Status = &vsv1.VolumeSnapshotStatus{CreationTime: &now, ReadyToUse: ptr.To(true), RestoreSize: ptr.To(resource.MustParse("1Gi"))}
	if err := c.Status().Update(ctx, vs); err != nil {
		t.Fatal(err)
	}
	reconcileSnapshot()
	if !slices.Equal(g.calls, []string{"freeze vm 5m0s", "thaw vm"}) {
		t.Fatalf("guest calls %v, want a thaw once cut", g.calls)
	}
	if snap.Status.Phase != snapshotv1.Succeeded || !ptr.Deref(snap.Status.ReadyToUse, false) {
		t.Fatalf("snapshot %+v", snap.Status)
	}
	get(vm)
	if vm.Status.SnapshotInProgress != nil {
		t.Fatalf("VM still locked by %s", *vm.Status.SnapshotInProgress)
	}

	// Into a new VM.
	rr := &RestoreReconciler{Client: c}
	restore := func(name, target string, policy *snapshotv1.TargetReadinessPolicy) *snapshotv1.VirtualMachineRestore {
		r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			Annotations: map[string]string{requester.Annotation: `{"username":"restorer"}`}},
			Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: target},
				VirtualMachineSnapshotName: "s", TargetReadinessPolicy: policy}}
		create(r)
		return r
	}
	reconcileRestore := func(r *snapshotv1.VirtualMachineRestore) {
		t.Helper()
		if _, err := rr.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(r)}); err != nil {
			t.Fatal(err)
		}
		get(r)
	}
	toNew := restore("to-new", "copy", nil)
	reconcileRestore(toNew)
	if !ptr.Deref(toNew.Status.Complete, false) || len(toNew.Status.Restores) != 1 {
		t.Fatalf("restore %+v", toNew.Status)
	}
	copyVM := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "copy"}}
	get(copyVM)
	claimName := toNew.Status.Restores[0].PersistentVolumeClaimName
	if rs, _ := copyVM.RunStrategy(); rs != v1.RunStrategyHalted || copyVM.Annotations[requester.Annotation] != `{"username":"restorer"}` ||
		copyVM.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != claimName {
		t.Fatalf("new VM: %+v", copyVM)
	}
	restored := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claimName}}
	get(restored)
	if ds := restored.Spec.DataSource; ds == nil || ds.Name != vs.Name || !metav1.IsControlledBy(restored, copyVM) {
		t.Fatalf("restored claim %+v", restored)
	}

	// Into the running VM: it waits for the VM to stop, holding it.
	back := restore("back", "vm", nil)
	reconcileRestore(back)
	if c := condition(back.Status.Conditions, snapshotv1.ConditionProgressing); ptr.Deref(back.Status.Complete, false) || c == nil || c.Reason != reasonWaitGracePeriod {
		t.Fatalf("restore of a running VM: %+v", back.Status)
	}
	get(vm)
	if ptr.Deref(vm.Status.RestoreInProgress, "") != "back" {
		t.Fatalf("VM not locked by the restore: %v", vm.Status.RestoreInProgress)
	}
	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	reconcileRestore(back)
	get(vm)
	if !ptr.Deref(back.Status.Complete, false) || vm.Status.RestoreInProgress != nil ||
		vm.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != back.Status.Restores[0].PersistentVolumeClaimName ||
		*vm.Spec.RunStrategy != v1.RunStrategyAlways {
		t.Fatalf("restored VM %+v, restore %+v", vm, back.Status)
	}

	// Deleted, the snapshot takes its content along.
	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := sr.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(snap)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the snapshot and its content deleted", func() error {
		for _, o := range []client.Object{&snapshotv1.VirtualMachineSnapshot{}, &snapshotv1.VirtualMachineSnapshotContent{}} {
			name := snap.Name
			if _, ok := o.(*snapshotv1.VirtualMachineSnapshotContent); ok {
				name = ContentName(snap)
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, o); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %w", o, name, err)
			}
		}
		return nil
	})
}
