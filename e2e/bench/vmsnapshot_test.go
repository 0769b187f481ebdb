package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sys/unix"

	v1 "kubevirt.io/api/core/v1"
	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// freeBytes is what the file system of dir has free.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// snapshotCopy is the directory and copy method of the CSI snapshot that
// VolumeSnapshot ns/name was cut as, on node.
func snapshotCopy(t *testing.T, c client.Client, node, ns, name string) (dir, method string) {
	t.Helper()
	get := func(kind, ns, name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("snapshot.storage.k8s.io/v1")
		o.SetKind(kind)
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	contentName, _, _ := unstructured.NestedString(get("VolumeSnapshot", ns, name).Object, "status", "boundVolumeSnapshotContentName")
	handle, _, _ := unstructured.NestedString(get("VolumeSnapshotContent", "", contentName).Object, "status", "snapshotHandle")
	_, id, _ := strings.Cut(strings.TrimPrefix(handle, hoststorage.LocalPrefix), "/")
	dir = framework.HostPath(node, filepath.Join(framework.StorageRoot, ".snapshots", id))
	record, err := os.ReadFile(dir + ".json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"reflink", "sparse copy"} {
		if strings.Contains(string(record), `"method":"`+m+`"`) {
			method = m
		}
	}
	return dir, method
}

// allocated is what the files under dir have allocated.
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// bareSnapshots times n VolumeSnapshots of claim (created -> readyToUse),
// the baseline of a VM snapshot.
func bareSnapshots(t *testing.T, c client.Client, ns, claim string, n int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var took []time.Duration
	for i := 0; i < n; i++ {
		vs := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
			"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("bare-%s-%d", claim, i)},
			"spec":     map[string]any{"source": map[string]any{"persistentVolumeClaimName": claim}},
		}}
		start := time.Now()
		if err := c.Create(ctx, vs); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 5*time.Minute, "volume snapshot "+vs.GetName()+" ready", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vs), vs); err != nil {
				return err
			}
			if ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse"); !ready {
				return fmt.Errorf("not ready: %v", vs.Object["status"])
			}
			return nil
		})
		took = append(took, time.Since(start))
		if err := c.Delete(ctx, vs); err != nil {
			t.Fatal(err)
		}
		framework.WaitGone(t, c, vs, 2*time.Minute)
	}
	return took
}

// TestVMSnapshot measures a VirtualMachineSnapshot of a running VM (guest
// agent connected, so frozen meanwhile) whose 1 GiB data disk holds 256 MiB
// the guest wrote: created -> Succeeded (median of 3), and what its copy
// costs the node's storage, on each testbed node: the first node's XFS
// pool copies by reflink (cost: the pool's free space before and after),
// the second's plain directory sparsely (cost: the copy's blocks). The
// baseline is a bare VolumeSnapshot of the same claim, in the same run.
func TestVMSnapshot(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	const snapshots = 3
	for i, node := range f.Nodes(t) {
		pvc := diskClaim(t, f, c, ns, fmt.Sprintf("disk-%d", i), node, "1100Mi", "1G")

		vm := framework.GuestVM(ns, fmt.Sprintf("snap-bench-%d", i), framework.GuestImage, v1.RunStrategyAlways)
		spec := &vm.Spec.Template.Spec
		spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: "data", Serial: "benchdata", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
		spec.Volumes = append(spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}})
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running", framework.AgentConnected)
		dev := hotplugDisk(t, vmi, "benchdata")
		if out := inGuest(t, vmi, "dd if=/dev/urandom of=/dev/"+dev+" bs=1M count=256 conv=fsync 2>/dev/null && echo written"); !strings.Contains(out, "written") {
			t.Fatalf("writing the data disk: %q", out)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			t.Fatal(err)
		}
		source := allocated(t, framework.VolumeHostDir(pv))
		root := framework.HostPath(node, framework.StorageRoot)
		var took []time.Duration
		var freed, blocks int64
		var method string
		for j := 0; j < snapshots; j++ {
			before := freeBytes(t, root)
			snap := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", vm.Name, j)},
				Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: vm.Name}}}
			start := time.Now()
			if err := c.Create(ctx, snap); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, 5*time.Minute, "snapshot "+snap.Name+" succeeded", func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
					return err
				}
				if snap.Status == nil || snap.Status.Phase != snapshotv1.Succeeded || !ptr.Deref(snap.Status.ReadyToUse, false) {
					return fmt.Errorf("status %+v", snap.Status)
				}
				return nil
			})
			took = append(took, time.Since(start))
			freed = before - freeBytes(t, root)
			var dir string
			dir, method = snapshotCopy(t, c, node, ns, fmt.Sprintf("vmsnapshot-%s-volume-data", snap.UID))
			blocks = allocated(t, dir)
			if err := c.Delete(ctx, snap); err != nil {
				t.Fatal(err)
			}
			framework.WaitGone(t, c, snap, 2*time.Minute)
		}
		bare := bareSnapshots(t, c, ns, pvc.Name, snapshots)
		// A reflinked copy's blocks are the volume's: what it costs is what
		// the pool (the first node's own file system) lost. A sparse copy
		// owns its blocks; the second node's directory shares the host's
		// file system, whose free space others move meanwhile.
		used, how := blocks, "the copy's allocated blocks"
		if method == "reflink" {
			used, how = freed, "the pool's free space before and after; the copy's blocks, shared, are "+fmt.Sprintf("%.1f MiB", float64(blocks)/(1<<20))
		}
		t.Logf("node %s (%s): VM snapshot of a running 1 GiB-disk VM, 256 MiB written (the volume allocates %.1f MiB): median %s of %v; "+
			"a bare VolumeSnapshot of its claim: median %s of %v (ratio %.2f); storage used %.1f MiB (%s)",
			node, method, float64(source)/(1<<20), median(took), took, median(bare), bare, float64(median(took))/float64(median(bare)),
			float64(used)/(1<<20), how)
		if err := c.Delete(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
}
