package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/hotplug"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// volumeReady accepts a running VMI whose hotplugged volume name is Ready
// in the domain.
func volumeReady(name string) func(*v1.VirtualMachineInstance) error {
	return func(vmi *v1.VirtualMachineInstance) error {
		if err := framework.AgentConnected(vmi); err != nil {
			return err
		}
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.Name == name {
				if vs.HotplugVolume == nil || vs.Phase != v1.VolumeReady || vs.Target == "" {
					return fmt.Errorf("volume %s: %s %s: %s (target %q)", name, vs.Phase, vs.Reason, vs.Message, vs.Target)
				}
				return nil
			}
		}
		return fmt.Errorf("no status of volume %s yet", name)
	}
}

// volumeGone accepts a VMI without volume name, in spec or status.
func volumeGone(name string) func(*v1.VirtualMachineInstance) error {
	return func(vmi *v1.VirtualMachineInstance) error {
		for _, vs := range vmi.Status.VolumeStatus {
			if vs.Name == name {
				return fmt.Errorf("volume %s still %s: %s", name, vs.Phase, vs.Message)
			}
		}
		return nil
	}
}

func target(vmi *v1.VirtualMachineInstance, volume string) string {
	for _, vs := range vmi.Status.VolumeStatus {
		if vs.Name == volume {
			return vs.Target
		}
	}
	return ""
}

// guestDisks lists the guest's disks as "<dev>:<serial>" (SCSI serials
// from the disk's VPD page after its 4-byte header, virtio ones from
// sysfs).
const guestDisks = `for d in /sys/block/sd* /sys/block/vd*; do [ -e $d ] || continue; s=$(cat $d/serial 2>/dev/null || tail -c +5 $d/device/vpd_pg80 2>/dev/null); echo "$(basename $d):$s"; done`

// attachmentPods are the attachment Pods of vmi.
func attachmentPods(t *testing.T, c client.Client, vmi *v1.VirtualMachineInstance) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(context.Background(), pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{hotplug.VMIUIDLabel: string(vmi.UID)}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// TestHotplugVolume: `virtctl addvolume` of a DataVolume gives the running
// guest a new SCSI disk with its serial, without a reboot, through an
// attachment Pod on the VM's node; the guest writes it; `removevolume`
// takes it out and the Pod goes. With --persist the volume (a claim, on
// the virtio bus) goes into the VM's template and is there again after a
// restart, with what the guest wrote, and after its launcher Pod is
// deleted (a volume hotplugged without --persist is not). A claim that
// cannot be on the VM's node says why in the volume's status; a missing
// claim (another namespace's of that name too) and a single-node claim
// another VMI uses are refused; an editor of another namespace cannot add
// a volume to this VM.
func TestHotplugVolume(t *testing.T) {
	t.Parallel() // mostly waiting on its own VM: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()

	vm := framework.GuestVM(ns, "hotplug", framework.GuestImage, v1.RunStrategyAlways)
	// On one node, so that the node-local claim persisted below is there
	// again after the restart.
	node := f.Nodes(t)[0]
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{StorageClassName: ptr("tekvirt-shared"),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "runs", framework.AgentConnected)
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	boot := guestBootID(t, f, vmi)

	// An editor of another namespace cannot touch this VM's volumes.
	other := f.Namespace(t)
	userClient(t, f, other, "e2e-hotplug-stranger")
	addBody := `{"name":"data","disk":{"name":"data","disk":{"bus":"scsi"},"serial":"data"},"volumeSource":{"dataVolume":{"name":"data","hotpluggable":true}}}`
	if _, err := vmiSubresource(t, f, "e2e-hotplug-stranger", "PUT", ns, vm.Name, "addvolume", addBody); !apierrors.IsForbidden(err) {
		t.Errorf("another namespace's editor hotplugging into this VMI: %v, want Forbidden", err)
	}
	if err := subresource(t, f, "e2e-hotplug-stranger", ns, vm.Name, "addvolume", addBody); !apierrors.IsForbidden(err) {
		t.Errorf("another namespace's editor hotplugging into this VM: %v, want Forbidden", err)
	}

	start := time.Now()
	if out := virtctl(t, "addvolume", vm.Name, "--volume-name=data", "-n", ns); !strings.Contains(out, "Successfully submitted add volume request") {
		t.Errorf("virtctl addvolume said %q", out)
	}
	vmi = framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "with the hotplugged volume", volumeReady("data"))
	dev := target(vmi, "data")
	t.Logf("addvolume -> volume Ready as %s in %s", dev, time.Since(start).Round(100*time.Millisecond))
	framework.Eventually(t, 30*time.Second, "the hotplugged disk in the guest", func() error {
		if out := guestShell(t, f, vmi, guestDisks); !strings.Contains(out, dev+":data") {
			return fmt.Errorf("guest disks %q, want %s:data", out, dev)
		}
		return nil
	})
	pods := attachmentPods(t, c, vmi)
	if len(pods) != 1 || pods[0].Spec.NodeName != vmi.Status.NodeName {
		t.Fatalf("attachment Pods %d, want one on %s", len(pods), vmi.Status.NodeName)
	}
	wantEvent(t, f, ns, vm.Name, "VolumeReady", "Successfully attach hotplugged volume data to VM")
	out := guestShell(t, f, vmi, "printf hotplugged-data > /tmp/m && dd if=/tmp/m of=/dev/"+dev+" conv=fsync 2>/dev/null && echo 3 > /proc/sys/vm/drop_caches && head -c 15 /dev/"+dev)
	if !strings.Contains(out, "hotplugged-data") {
		t.Errorf("the guest writing and reading its hotplugged disk: %q", out)
	}
	framework.WaitVMI(t, c, ns, vm.Name, 30*time.Second, "not live-migratable", framework.LiveMigratable(corev1.ConditionFalse, v1.VirtualMachineInstanceReasonHotplugNotMigratable, "data"))
	if got := guestBootID(t, f, vmi); got != boot {
		t.Errorf("the guest rebooted: boot_id %s, was %s", got, boot)
	}

	// A claim that does not exist here (another namespace's of that name
	// included), and a single-node claim another VMI uses, are refused,
	// naming the cause; nothing is attached.
	claim(t, c, other, "theirs", nil)
	claim(t, c, ns, "held", nil)
	holder := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}, Spec: framework.GuestVMI(framework.GuestImage, "holder")}
	holder.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "no-such-node"} // pending: it holds the claim all the same
	holder.Spec.Domain.Devices.Disks = append(holder.Spec.Domain.Devices.Disks, v1.Disk{Name: "held", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	holder.Spec.Volumes = append(holder.Spec.Volumes, v1.Volume{Name: "held", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "held"}}}})
	if err := c.Create(ctx, holder); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ claim, want, virtctlWant string }{
		// virtctl looks the claim up itself first and says so.
		{"missing", "Unable to add volume [missing]: PersistentVolumeClaim missing does not exist in namespace " + ns, "Volume missing is not a DataVolume or PersistentVolumeClaim"},
		{"theirs", "Unable to add volume [theirs]: PersistentVolumeClaim theirs does not exist in namespace " + ns, "Volume theirs is not a DataVolume or PersistentVolumeClaim"},
		{"held", "Unable to add volume [held]: claim held is not ReadWriteMany and VirtualMachineInstance holder uses it", ""},
	} {
		body := fmt.Sprintf(`{"name":%q,"disk":{"name":%q,"disk":{"bus":"scsi"}},"volumeSource":{"persistentVolumeClaim":{"claimName":%q,"hotpluggable":true}}}`, tc.claim, tc.claim, tc.claim)
		if _, err := vmiSubresource(t, f, "", "PUT", ns, vm.Name, "addvolume", body); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("addvolume of claim %s: %v, want %q", tc.claim, err, tc.want)
		}
		if tc.virtctlWant == "" {
			tc.virtctlWant = tc.want
		}
		if out, err := virtctlOut(t, "addvolume", vm.Name, "--volume-name="+tc.claim, "-n", ns); err == nil || !strings.Contains(out, tc.virtctlWant) {
			t.Errorf("virtctl addvolume of claim %s: %v, said %q, want %q", tc.claim, err, out, tc.virtctlWant)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil || len(vmi.Spec.Volumes) != 3 || len(attachmentPods(t, c, vmi)) != 1 {
		t.Errorf("after the refused volumes: %d volumes (want the two boot ones and data), %d attachment Pods, %v", len(vmi.Spec.Volumes), len(attachmentPods(t, c, vmi)), err)
	}
	if err := c.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}

	if out := virtctl(t, "removevolume", vm.Name, "--volume-name=data", "-n", ns); !strings.Contains(out, "Successfully submitted remove volume request") {
		t.Errorf("virtctl removevolume said %q", out)
	}
	vmi = framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "without the volumes", func(got *v1.VirtualMachineInstance) error {
		return volumeGone("data")(got)
	})
	framework.Eventually(t, time.Minute, "the attachment Pod gone", func() error {
		if pods := attachmentPods(t, c, vmi); len(pods) > 0 {
			return fmt.Errorf("%d attachment Pods", len(pods))
		}
		return nil
	})
	if out := guestShell(t, f, vmi, guestDisks); strings.Contains(out, ":data") {
		t.Errorf("the guest still has the removed disk: %q", out)
	}
	framework.WaitVMI(t, c, ns, vm.Name, 30*time.Second, "live-migratable again", func(got *v1.VirtualMachineInstance) error {
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineInstanceIsMigratable && cond.Reason == v1.VirtualMachineInstanceReasonHotplugNotMigratable {
				return fmt.Errorf("LiveMigratable: %s", cond.Message)
			}
		}
		return nil
	})

	// --persist: a node-local claim on the VM's node, on the virtio bus,
	// kept in the template and there again after a restart.
	local := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local", Annotations: map[string]string{"kubevirt.io/provisionOnNode": node}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}
	if err := c.Create(ctx, local); err != nil {
		t.Fatal(err)
	}
	writeClaimOn(t, f, c, ns, "local", node, "truncate -s 32M /data/disk.img && printf persisted-local | dd of=/data/disk.img conv=notrunc 2>/dev/null")
	virtctl(t, "addvolume", vm.Name, "--volume-name=local", "--persist", "--serial=local1", "--bus=virtio", "-n", ns)
	vmi = framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "with the persisted volume", volumeReady("local"))
	if dev := target(vmi, "local"); !strings.HasPrefix(dev, "vd") {
		t.Errorf("the virtio volume's target %q", dev)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if vols := vm.Spec.Template.Spec.Volumes; len(vols) != 3 || vols[2].PersistentVolumeClaim == nil || !vols[2].PersistentVolumeClaim.Hotpluggable {
		t.Fatalf("the VM's template after --persist: %+v", vols)
	}
	virtctl(t, "restart", vm.Name, "-n", ns)
	restarted := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "restarted with the persisted volume", func(got *v1.VirtualMachineInstance) error {
		if got.UID == vmi.UID {
			return fmt.Errorf("not restarted yet")
		}
		return volumeReady("local")(got)
	})
	dev = target(restarted, "local")
	framework.Eventually(t, 30*time.Second, "the persisted disk's content in the restarted guest", func() error {
		if out := guestShell(t, f, restarted, "head -c 15 /dev/"+dev+"; echo; "+guestDisks); !strings.Contains(out, "persisted-local") || !strings.Contains(out, dev+":local1") {
			return fmt.Errorf("guest says %q", out)
		}
		return nil
	})

	// The launcher Pod lost (runStrategy Always): the VM comes back with
	// the persisted volume and without one hotplugged only into the VMI.
	virtctl(t, "addvolume", vm.Name, "--volume-name=data", "-n", ns)
	restarted = framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "with data hotplugged again", volumeReady("data"))
	if err := c.Delete(ctx, f.LauncherPod(t, restarted)); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "back after its launcher Pod was deleted", func(got *v1.VirtualMachineInstance) error {
		if got.UID == restarted.UID {
			return fmt.Errorf("not replaced yet")
		}
		if err := volumeReady("local")(got); err != nil {
			return err
		}
		for _, v := range got.Spec.Volumes {
			if v.Name == "data" {
				return fmt.Errorf("volume data, hotplugged without --persist, is back")
			}
		}
		return nil
	})

	// A node-local claim on another node cannot be attached here: its
	// volume status says why.
	if len(f.Nodes(t)) > 1 {
		var elsewhere string
		for _, n := range f.Nodes(t) {
			if n != node {
				elsewhere = n
			}
		}
		far := local.DeepCopy()
		far.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "far", Annotations: map[string]string{"kubevirt.io/provisionOnNode": elsewhere}}
		if err := c.Create(ctx, far); err != nil {
			t.Fatal(err)
		}
		virtctl(t, "addvolume", vm.Name, "--volume-name=far", "-n", ns)
		framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "the far claim refused", func(got *v1.VirtualMachineInstance) error {
			for _, vs := range got.Status.VolumeStatus {
				if vs.Name == "far" && vs.Phase == v1.VolumePending && vs.Reason == hotplug.ReasonUnschedulable {
					t.Logf("far volume: %s", vs.Message)
					return nil
				}
			}
			return fmt.Errorf("volume status %+v", got.Status.VolumeStatus)
		})
	}
}

// writeClaimOn runs script in a Pod on node (any, if "") with the claim at
// /data and waits for it to succeed.
func writeClaimOn(t *testing.T, f *framework.Framework, c client.Client, ns, claim, node, script string) {
	t.Helper()
	name := fmt.Sprintf("%s-%d", claim, time.Now().UnixNano()%100000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(65532))},
			Containers: []corev1.Container{{
				Name: "sh", Image: registryImage(t, f, "tekvirt/busybox"), Command: []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
	if node != "" {
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	}
	if err := c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	f.WaitPodSucceeded(t, ns, name, 2*time.Minute)
	if err := c.Delete(context.Background(), pod); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
