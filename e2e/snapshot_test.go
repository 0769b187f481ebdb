package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestVolumeSnapshotRestore, as a namespace editor: a claim of the default
// class is written, snapshotted (the hostpath storage's VolumeSnapshotClass,
// the default), written again; a claim restored from the snapshot holds
// the first write, on the source's node, sharing its blocks on the
// testbed's XFS. The snapshot's copy goes with the snapshot. A DataVolume
// of the snapshot in another namespace is a clone: refused to a stranger,
// made for a user who may clone from the snapshot's namespace. An editor
// of another namespace who binds a snapshot of their own to the first
// one's content gets nothing: the content is not theirs.
func TestVolumeSnapshotRestore(t *testing.T) {
	f := framework.New(t)
	ns, other := f.Namespace(t), f.Namespace(t)
	c, admin := userClient(t, f, ns, "e2e-snapshotter"), f.VMClient(t)
	ctx := context.Background()
	claim(t, c, ns, "data", nil)
	// A file, and a disk image (what a clone of the snapshot copies).
	writeClaim(t, f, c, ns, "data", "echo before > /data/file && truncate -s 1M /data/disk.img && printf disk-before | dd of=/data/disk.img conv=notrunc 2>/dev/null")
	snap := volumeSnapshot(ns, "snap", map[string]any{"persistentVolumeClaimName": "data"})
	if err := c.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	waitSnapshotReady(t, c, snap)
	writeClaim(t, f, c, ns, "data", "echo after > /data/file")

	claim(t, c, ns, "restored", &corev1.TypedLocalObjectReference{APIGroup: ptr("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"})
	writeClaim(t, f, c, ns, "restored", `test "$(cat /data/file)" = before`)
	src, restored := boundVolume(t, admin, ns, "data"), boundVolume(t, admin, ns, "restored")
	if hostpath.VolumeNode(restored) != hostpath.VolumeNode(src) {
		t.Errorf("restored on %q, the source is on %q", hostpath.VolumeNode(restored), hostpath.VolumeNode(src))
	}
	if b, err := os.ReadFile(filepath.Join(framework.VolumeHostDir(src), "file")); err != nil || string(b) != "after\n" {
		t.Errorf("the source after the restore: %q, %v", b, err)
	}

	// CDI's way: a DataVolume of the snapshot; another namespace's editor
	// cannot name it.
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-snap"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Namespace: ns, Name: "snap"}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}}
	stolen := dv.DeepCopy()
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	writeClaim(t, f, c, ns, dv.Name, `test "$(cat /data/file)" = before`)
	// Across namespaces, as a clone: refused to an editor of the other
	// namespace alone; made for one who may clone here (a transfer claim
	// restored here, cloned there, then dropped).
	stolen.Namespace = other
	err := userClient(t, f, other, "e2e-dv-snapshot-thief").Create(ctx, stolen)
	if err == nil || !strings.Contains(err.Error(), "e2e-dv-snapshot-thief may not clone VolumeSnapshot "+ns+"/snap") {
		t.Errorf("a DataVolume of another namespace's snapshot, by a stranger to it: %v", err)
	}
	userClient(t, f, ns, "e2e-dv-snapshot-cloner")
	across := stolen.DeepCopy()
	across.Name = "across"
	if err := userClient(t, f, other, "e2e-dv-snapshot-cloner").Create(ctx, across); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, admin, across, cdiv1.Succeeded)
	writeClaim(t, f, admin, other, across.Name, `test "$(head -c 11 /data/disk.img)" = disk-before`)
	framework.Eventually(t, time.Minute, "the transfer claim gone", func() error {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := admin.List(ctx, claims, client.InNamespace(ns), client.HasLabels{datavolume.TransferLabel}); err != nil {
			return err
		}
		if len(claims.Items) > 0 {
			return fmt.Errorf("transfer claim %s left", claims.Items[0].Name)
		}
		return nil
	})

	content := snapshotContent(t, admin, snap)
	handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
	_, name, _ := strings.Cut(strings.TrimPrefix(handle, hoststorage.LocalPrefix), "/")
	copyDir := framework.HostPath(hostpath.VolumeNode(src), filepath.Join(framework.StorageRoot, ".snapshots", name))
	want := "sparse copy"
	if reflinks(t, filepath.Dir(filepath.Dir(copyDir))) {
		want = "reflink"
	}
	record, err := os.ReadFile(copyDir + ".json")
	if err != nil || !strings.Contains(string(record), `"method":"`+want+`"`) {
		t.Errorf("snapshot %s record %s: %v; want a %s, as the node's storage root allows", handle, record, err, want)
	}

	// Another namespace's editor names the content in a snapshot of
	// their own, and restores from it.
	oc := userClient(t, f, other, "e2e-snapshot-thief")
	theft := volumeSnapshot(other, "theft", map[string]any{"volumeSnapshotContentName": content.GetName()})
	if err := oc.Create(ctx, theft); err != nil {
		t.Fatal(err)
	}
	claim(t, oc, other, "loot", &corev1.TypedLocalObjectReference{APIGroup: ptr("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "theft"})
	time.Sleep(10 * time.Second)
	if err := oc.Get(ctx, client.ObjectKeyFromObject(theft), theft); err != nil {
		t.Fatal(err)
	}
	if ready, _, _ := unstructured.NestedBool(theft.Object, "status", "readyToUse"); ready {
		t.Errorf("another namespace's snapshot bound to %s: %v", content.GetName(), theft.Object["status"])
	}
	loot := &corev1.PersistentVolumeClaim{}
	if err := oc.Get(ctx, client.ObjectKey{Namespace: other, Name: "loot"}, loot); err != nil || loot.Spec.VolumeName != "" {
		t.Errorf("a claim restored from another namespace's snapshot got volume %q (%v)", loot.Spec.VolumeName, err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(content), content); err != nil {
		t.Fatal(err)
	}
	if ref, _, _ := unstructured.NestedString(content.Object, "spec", "volumeSnapshotRef", "namespace"); ref != ns {
		t.Errorf("the content now belongs to namespace %q", ref)
	}

	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the snapshot's copy removed with it", func() error {
		if _, err := os.Stat(copyDir); !os.IsNotExist(err) {
			return fmt.Errorf("%s: %w", copyDir, err)
		}
		return nil
	})
}

// TestSharedVolumeSnapshot: a volume of the shared class is snapshotted
// (by the node the snapshot controller picks among those with the shared
// root) and restored into the shared class, ReadWriteMany.
func TestSharedVolumeSnapshot(t *testing.T) {
	f := framework.New(t)
	f.TwoNodes(t)
	ns := f.Namespace(t)
	c := userClient(t, f, ns, "e2e-snapshotter")
	shared := &corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("tekvirt-shared"),
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}
	claimLike(t, c, ns, "data", shared, nil)
	writeClaim(t, f, c, ns, "data", "echo shared-before > /data/file")
	snap := volumeSnapshot(ns, "snap", map[string]any{"persistentVolumeClaimName": "data"})
	if err := c.Create(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	waitSnapshotReady(t, c, snap)
	writeClaim(t, f, c, ns, "data", "echo shared-after > /data/file")
	claimLike(t, c, ns, "restored", shared, &corev1.TypedLocalObjectReference{APIGroup: ptr("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"})
	writeClaim(t, f, c, ns, "restored", `test "$(cat /data/file)" = shared-before`)
	if pv := boundVolume(t, f.VMClient(t), ns, "restored"); !hostpath.VerifiedShared(pv) {
		t.Errorf("the restored volume is not a verified shared one: %+v", pv.Spec)
	}
}

// claim makes a 64Mi claim of the default class, from source if set.
func claim(t *testing.T, c client.Client, ns, name string, source *corev1.TypedLocalObjectReference) {
	t.Helper()
	claimLike(t, c, ns, name, &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}, source)
}

// claimLike makes a 64Mi claim with the class and access modes of spec,
// from source if set.
func claimLike(t *testing.T, c client.Client, ns, name string, spec *corev1.PersistentVolumeClaimSpec, source *corev1.TypedLocalObjectReference) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      spec.AccessModes,
			StorageClassName: spec.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
			DataSource:       source,
		},
	}
	if err := c.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
}

// writeClaim runs script in a Pod with the claim at /data and waits for
// it to succeed.
func writeClaim(t *testing.T, f *framework.Framework, c client.Client, ns, claim, script string) {
	t.Helper()
	writeClaimOn(t, f, c, ns, claim, "", script)
}

// volumeSnapshot is a VolumeSnapshot of the default class from source.
func volumeSnapshot(ns, name string, source map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"source": source},
	}}
}

func waitSnapshotReady(t *testing.T, c client.Client, snap *unstructured.Unstructured) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "VolumeSnapshot "+snap.GetName()+" readyToUse", func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(snap), snap); err != nil {
			return err
		}
		if ready, _, _ := unstructured.NestedBool(snap.Object, "status", "readyToUse"); !ready {
			return fmt.Errorf("status %v", snap.Object["status"])
		}
		return nil
	})
}

// snapshotContent is the VolumeSnapshotContent snap is bound to, read
// with the admin's client.
func snapshotContent(t *testing.T, admin client.Client, snap *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	name, _, _ := unstructured.NestedString(snap.Object, "status", "boundVolumeSnapshotContentName")
	content := &unstructured.Unstructured{}
	content.SetAPIVersion("snapshot.storage.k8s.io/v1")
	content.SetKind("VolumeSnapshotContent")
	if err := admin.Get(context.Background(), client.ObjectKey{Name: name}, content); err != nil {
		t.Fatal(err)
	}
	return content
}

// boundVolume is the PersistentVolume the claim ns/name is bound to, read
// with the admin's client.
func boundVolume(t *testing.T, admin client.Client, ns, name string) *corev1.PersistentVolume {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := admin.Get(context.Background(), client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	return pv
}

// reflinks says whether the file system of dir shares blocks between a
// file and its clone (the testbed's first node has an XFS pool with
// reflink; an extra node's storage is a plain directory).
func reflinks(t *testing.T, dir string) bool {
	t.Helper()
	a, err := os.CreateTemp(dir, ".reflink-probe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(a.Name())
	defer a.Close()
	b, err := os.CreateTemp(dir, ".reflink-probe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(b.Name())
	defer b.Close()
	return unix.IoctlFileClone(int(b.Fd()), int(a.Fd())) == nil
}
