package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authnv1 "k8s.io/api/authentication/v1"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// dataDisk is a script printing the guest's disk with serial snapdata.
const dataDisk = `for b in /sys/block/vd*; do [ "$(cat $b/serial 2>/dev/null)" = snapdata ] && basename $b; done`

// writeDataDisk writes word at the start of vmi's data disk, synced.
func writeDataDisk(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance, word string) {
	t.Helper()
	out := guestShell(t, f, vmi, fmt.Sprintf(`d=$(%s); echo %s | dd of=/dev/$d bs=512 count=1 conv=sync,fsync 2>/dev/null && echo written`, dataDisk, word))
	if !strings.Contains(out, "written") {
		t.Fatalf("writing %s to the data disk: %q", word, out)
	}
}

// readDataDisk is the first line of vmi's data disk.
func readDataDisk(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance) string {
	t.Helper()
	return strings.TrimSpace(guestShell(t, f, vmi, fmt.Sprintf(`d=$(%s); head -c 64 /dev/$d | head -n 1`, dataDisk)))
}

func waitVMSnapshot(t *testing.T, c client.Client, ns, name string, phase snapshotv1.VirtualMachineSnapshotPhase) *snapshotv1.VirtualMachineSnapshot {
	t.Helper()
	s := &snapshotv1.VirtualMachineSnapshot{}
	framework.Eventually(t, 3*time.Minute, "VM snapshot "+name+" "+string(phase), func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return err
		}
		if s.Status == nil || s.Status.Phase != phase {
			return fmt.Errorf("status %+v", s.Status)
		}
		return nil
	})
	return s
}

func waitVMRestore(t *testing.T, c client.Client, ns, name string) *snapshotv1.VirtualMachineRestore {
	t.Helper()
	r := &snapshotv1.VirtualMachineRestore{}
	framework.Eventually(t, 3*time.Minute, "VM restore "+name+" complete", func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
			return err
		}
		if r.Status == nil || r.Status.Complete == nil || !*r.Status.Complete {
			return fmt.Errorf("status %+v", r.Status)
		}
		return nil
	})
	return r
}

func vmRef(name string) corev1.TypedLocalObjectReference {
	return corev1.TypedLocalObjectReference{APIGroup: ptr("kubevirt.io"), Kind: "VirtualMachine", Name: name}
}

// TestVMSnapshotRestore: an editor snapshots a running VM (its guest
// agent freezes the guest meanwhile, and the snapshot says so), the guest
// writes on after it, and the snapshot is restored into a new VM and then
// into the VM itself (stopped for it by StopTarget): both see the disk as
// it was at the snapshot. The content is the controller's (the editor
// cannot change it); another namespace cannot restore the snapshot; a
// snapshot of something that is not a VM, and a restore tekvirt does not
// do, are refused naming the field; deleting the snapshot deletes its
// content and volume snapshots.
func TestVMSnapshotRestore(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	user := "e2e-vm-snapshotter"
	c, admin := userClient(t, f, ns, user), f.VMClient(t)
	ctx := context.Background()

	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	vm := framework.GuestVM(ns, "snapped", framework.GuestImage, v1.RunStrategyAlways)
	spec := &vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: "data", Serial: "snapdata", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "data"}}})
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, admin, ns, vm.Name, 3*time.Minute, "runs", framework.AgentConnected)
	writeDataDisk(t, f, vmi, "before-snapshot")

	start := time.Now()
	snap := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snap"},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: vmRef(vm.Name)}}
	if err := c.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	snap = waitVMSnapshot(t, c, ns, "snap", snapshotv1.Succeeded)
	t.Logf("snapshot of a running VM taken in %s", time.Since(start).Round(100*time.Millisecond))
	st := snap.Status
	if st.ReadyToUse == nil || !*st.ReadyToUse || st.CreationTime == nil {
		t.Errorf("snapshot ready %v, created %v", st.ReadyToUse, st.CreationTime)
	}
	// Both fields: KubeVirt's clients still read the deprecated one.
	indications := st.Indications //nolint:staticcheck // deprecated, still written
	if !slices.Equal(indications, []snapshotv1.Indication{snapshotv1.VMSnapshotGuestAgentIndication, snapshotv1.VMSnapshotOnlineSnapshotIndication}) || len(st.SourceIndications) != 2 {
		t.Errorf("indications %v (%+v), want GuestAgent and Online", indications, st.SourceIndications)
	}
	if st.SnapshotVolumes == nil || !slices.Equal(st.SnapshotVolumes.IncludedVolumes, []string{"data"}) || len(st.SnapshotVolumes.ExcludedVolumes) != 0 {
		t.Errorf("snapshot volumes %+v, want data included", st.SnapshotVolumes)
	}
	// The guest agent froze the guest for the volume snapshots and thawed it.
	launcher := f.LauncherPod(t, vmi)
	logs, err := f.Kube.CoreV1().Pods(ns).GetLogs(launcher.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "guest file systems frozen") || !strings.Contains(string(logs), "guest file systems thawed") {
		t.Errorf("the launcher's log does not show the freeze and thaw (%v):\n%s", err, logs)
	}
	// The guest was thawed: its root file system takes writes again.
	if out := guestShell(t, f, vmi, "echo thawed > /root/thawed && sync && cat /root/thawed"); !strings.Contains(out, "thawed") {
		t.Errorf("the guest after the snapshot: %q", out)
	}
	got := &v1.VirtualMachine{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vm), got); err != nil || got.Status.SnapshotInProgress != nil {
		t.Errorf("VM after the snapshot: snapshotInProgress %v, %v", got.Status.SnapshotInProgress, err)
	}
	content := &snapshotv1.VirtualMachineSnapshotContent{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *st.VirtualMachineSnapshotContentName}, content); err != nil {
		t.Fatal(err)
	}
	if len(content.Spec.VolumeBackups) != 1 || content.Spec.VolumeBackups[0].PersistentVolumeClaim.Name != "data" {
		t.Errorf("content backs up %+v, want claim data", content.Spec.VolumeBackups)
	}
	content.Spec.Source.VirtualMachine.Spec.Template.Spec.Domain.Devices.Disks = nil
	if err := c.Update(ctx, content); !apierrors.IsForbidden(err) {
		t.Errorf("an editor changing the content a restore trusts: %v, want Forbidden", err)
	}
	wantEvent(t, f, ns, "snap", "SuccessfulVirtualMachineSnapshot", "Snapshot of VirtualMachine snapped taken")

	writeDataDisk(t, f, vmi, "after-snapshot")

	// Into a new VM: created stopped, as the editor's, with its own disk.
	res := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-new"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: vmRef("restored"), VirtualMachineSnapshotName: "snap"}}
	if err := c.Create(ctx, res); err != nil {
		t.Fatal(err)
	}
	res = waitVMRestore(t, c, ns, "to-new")
	if len(res.Status.Restores) != 1 || res.Status.Restores[0].DataVolumeName == nil {
		t.Fatalf("restores %+v, want the data volume's", res.Status.Restores)
	}
	restored := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "restored"}, restored); err != nil {
		t.Fatal(err)
	}
	if rs, _ := restored.RunStrategy(); rs != v1.RunStrategyHalted {
		t.Errorf("the new VM's run strategy %s, want Halted", rs)
	}
	var who authnv1.UserInfo
	if err := json.Unmarshal([]byte(restored.Annotations[requester.Annotation]), &who); err != nil || who.Username != user {
		t.Errorf("the new VM's requester %q, want %s", restored.Annotations[requester.Annotation], user)
	}
	if err := subresource(t, f, user, ns, "restored", "start", "{}"); err != nil {
		t.Fatal(err)
	}
	newVMI := framework.WaitVMI(t, admin, ns, "restored", 3*time.Minute, "runs", framework.AgentConnected)
	if got := readDataDisk(t, f, newVMI); got != "before-snapshot" {
		t.Errorf("the new VM's data disk reads %q, want before-snapshot", got)
	}

	// Another namespace's editor cannot restore it.
	other := f.Namespace(t)
	oc := userClient(t, f, other, "e2e-vm-snapshot-thief")
	theft := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "theft"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: vmRef("stolen"), VirtualMachineSnapshotName: "snap"}}
	if err := oc.Create(ctx, theft); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the theft waiting for a snapshot of its own namespace", func() error {
		if err := oc.Get(ctx, client.ObjectKeyFromObject(theft), theft); err != nil {
			return err
		}
		if theft.Status == nil || len(theft.Status.Conditions) == 0 || !strings.Contains(theft.Status.Conditions[0].Reason, "VMSnapshot "+other+"/snap does not exist") {
			return fmt.Errorf("status %+v", theft.Status)
		}
		return nil
	})
	if err := oc.Get(ctx, client.ObjectKey{Namespace: other, Name: "stolen"}, &v1.VirtualMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("the theft's VM: %v, want none", err)
	}

	// Into the VM itself, running: StopTarget stops it first; it stays
	// stopped, as it was when restored.
	back := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "back"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: vmRef(vm.Name), VirtualMachineSnapshotName: "snap",
			TargetReadinessPolicy: ptr(snapshotv1.VirtualMachineRestoreStopTarget)}}
	if err := c.Create(ctx, back); err != nil {
		t.Fatal(err)
	}
	back = waitVMRestore(t, c, ns, "back")
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.RestoreInProgress != nil {
		t.Errorf("VM still locked by restore %s", *got.Status.RestoreInProgress)
	}
	claimOf := func(vm *v1.VirtualMachine) string {
		for _, v := range vm.Spec.Template.Spec.Volumes {
			if v.Name == "data" && v.DataVolume != nil {
				return v.DataVolume.Name
			}
		}
		return ""
	}
	if name := claimOf(got); name != back.Status.Restores[0].PersistentVolumeClaimName || name == "data" {
		t.Errorf("the VM's data volume is %q after the restore, want %s", name, back.Status.Restores[0].PersistentVolumeClaimName)
	}
	if err := subresource(t, f, user, ns, vm.Name, "start", "{}"); err != nil {
		t.Fatal(err)
	}
	vmi = framework.WaitVMI(t, admin, ns, vm.Name, 3*time.Minute, "runs again", func(v *v1.VirtualMachineInstance) error {
		if v.UID == vmi.UID {
			return errors.New("still the VMI from before the restore")
		}
		return framework.AgentConnected(v)
	})
	if got := readDataDisk(t, f, vmi); got != "before-snapshot" {
		t.Errorf("the restored VM's data disk reads %q, want before-snapshot", got)
	}

	// Bad input is refused at once, naming the field.
	bad := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "of-a-pod"},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{Kind: "Pod", Name: "x"}}}
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.source: Pod x") {
		t.Errorf("a snapshot of a Pod: %v, want refused naming spec.source", err)
	}
	inPlace := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-place"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: vmRef(vm.Name), VirtualMachineSnapshotName: "snap",
			VolumeRestorePolicy: ptr(snapshotv1.VolumeRestorePolicyInPlace)}}
	if err := c.Create(ctx, inPlace); err == nil || !strings.Contains(err.Error(), "spec.volumeRestorePolicy") {
		t.Errorf("an in-place restore: %v, want refused naming spec.volumeRestorePolicy", err)
	}

	// Deleting the snapshot deletes its content and volume snapshots.
	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the snapshot's content and volume snapshots gone", func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(content), &snapshotv1.VirtualMachineSnapshotContent{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("content: %w", err)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: vsv1.GroupName, Version: "v1", Kind: "VolumeSnapshotList"})
		if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d VolumeSnapshots left", len(list.Items))
		}
		return nil
	})
}
