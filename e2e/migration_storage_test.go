package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// TestLiveMigrationSharedDisk: the docs' VM booted from a DataVolume of
// the tekvirt-shared class, written as a KubeVirt user writes one (a
// dataVolumeTemplate naming the class, no access modes), gets a
// ReadWriteMany claim on a volume pinned to no node, can live-migrate,
// and moves with its disk left in place (LiveMigration: nothing copied). What the guest wrote
// on the disk before the migration is there after it, what it writes
// after it is on the volume once the VM restarts, with one QEMU at a
// time. A ReadWriteMany claim of the node-local tekvirt-hostpath class is
// refused, naming the shared class, and an editor of another namespace
// cannot bind the shared volume to a claim of theirs.
func TestLiveMigrationSharedDisk(t *testing.T) {
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	local := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rwx-local"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("tekvirt-hostpath"),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}
	if err := c.Create(ctx, local); err != nil {
		t.Fatal(err)
	}

	// The VM of the docs, as written.
	vm := &v1.VirtualMachine{}
	if err := yaml.UnmarshalStrict([]byte(docexample.Find(t, "vms-shared-dv").Body), vm); err != nil {
		t.Fatal(err)
	}
	vm.Namespace = ns
	disk := vm.Spec.DataVolumeTemplates[0].Name
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "runs", framework.AgentConnected)
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 30*time.Second, "live-migratable", framework.LiveMigratable(corev1.ConditionTrue, "", ""))
	boot := guestBootID(t, f, vmi)
	wantEvent(t, f, ns, local.Name, "ProvisioningFailed", `volumes of this class live on one node; use a class with parameter shared: "true" (tekvirt-shared)`)

	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: disk}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteMany || hostpath.VolumeNode(pv) != "" {
		t.Fatalf("claim %s: access modes %v, volume %s pinned to %q; want ReadWriteMany on no node", disk, pvc.Spec.AccessModes, pv.Name, hostpath.VolumeNode(pv))
	}

	// An editor of another namespace cannot take the shared volume: a
	// claim naming it stays unbound, the volume stays this claim's.
	other := f.Namespace(t)
	thief := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "stolen"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("tekvirt-shared"), VolumeName: pv.Name,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}}}
	if err := userClient(t, f, other, "e2e-shared-thief").Create(ctx, thief); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(thief), thief); err != nil || thief.Status.Phase == corev1.ClaimBound {
		t.Errorf("another namespace's claim of volume %s: %s (%v), want it unbound", pv.Name, thief.Status.Phase, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: pv.Name}, pv); err != nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns {
		t.Errorf("volume %s's claim after another namespace asked for it: %+v (%v)", pv.Name, pv.Spec.ClaimRef, err)
	}

	// The guest runs from its initramfs: it writes to the disk itself, in
	// its last MiB (the boot partition is at its start), and reads it back
	// past its page cache.
	const (
		mib   = "n=$(( $(cat /sys/block/vda/size) / 2048 - 1 )); "
		read  = mib + "echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/vda bs=1M skip=$n count=1 2>/dev/null | tr -d '\\000' | head -c 200; echo; "
		write = mib + "dd if=/tmp/marker of=/dev/vda bs=1M seek=$n conv=fsync 2>/dev/null && echo written"
	)
	source := vmi.Status.NodeName
	if out := guestShell(t, f, vmi, "printf 'before-migration;' > /tmp/marker && "+write); !strings.Contains(out, "written") {
		t.Fatalf("writing to the disk: %q", out)
	}
	start := time.Now()
	if out := virtctl(t, "migrate", vm.Name, "-n", ns); !strings.Contains(out, "was scheduled to migrate") {
		t.Errorf("virtctl migrate said %q", out)
	}
	m := waitMigration(t, c, ns, vm.Name, 5*time.Minute)
	t.Logf("migration %s: %s in %s", m.Name, m.Status.Phase, time.Since(start).Round(100*time.Millisecond))
	if m.Status.Phase != v1.MigrationSucceeded {
		t.Fatalf("migration %s %s: %+v", m.Name, m.Status.Phase, m.Status.MigrationState)
	}
	moved := framework.WaitVMI(t, c, ns, vm.Name, time.Minute, "running on the other node", func(got *v1.VirtualMachineInstance) error {
		if got.Status.NodeName == source {
			return fmt.Errorf("still on %s", source)
		}
		return framework.AgentConnected(got)
	})
	// The claim is the VM's only disk: nothing is copied.
	logs, err := f.Kube.CoreV1().Pods(ns).GetLogs(m.Status.MigrationState.SourcePod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if copied := regexp.MustCompile(`"copiedDisks":"[^"]*"`).FindString(string(logs)); copied != `"copiedDisks":""` {
		t.Errorf("the source launcher's log says %q; want no disk copied (the claim is shared)", copied)
	}
	if moved.Status.MigrationMethod != v1.LiveMigration {
		t.Errorf("migration method %q, want %q (no local disk)", moved.Status.MigrationMethod, v1.LiveMigration)
	}
	if got := guestBootID(t, f, moved); got != boot {
		t.Errorf("the guest booted again: boot_id %s, was %s", got, boot)
	}
	if n := framework.QEMUCount(domain.Name(vmi)); n != 1 {
		t.Errorf("%d QEMUs run the domain, want 1", n)
	}
	out := guestShell(t, f, moved, read+"printf 'before-migration;after-migration;' > /tmp/marker && "+write)
	if !strings.Contains(out, "before-migration;") || !strings.Contains(out, "written") {
		t.Fatalf("the guest's disk after its migration: %q", out)
	}

	// The disk is the volume's: a restarted VM (a new QEMU, on either node)
	// finds both writes.
	virtctl(t, "restart", vm.Name, "-n", ns)
	restarted := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running again", func(got *v1.VirtualMachineInstance) error {
		if got.UID == vmi.UID {
			return fmt.Errorf("still the migrated VMI")
		}
		return framework.AgentConnected(got)
	})
	out = guestShell(t, f, restarted, read)
	t.Logf("the disk read by the VM restarted on %s: %q", restarted.Status.NodeName, strings.TrimSpace(out))
	if !strings.Contains(out, "before-migration;after-migration;") {
		t.Errorf("the shared disk after a restart on %s: %q", restarted.Status.NodeName, out)
	}
}
