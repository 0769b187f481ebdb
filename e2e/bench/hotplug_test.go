package bench

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// hotplugDisk finds the guest's disk with serial, or "".
func hotplugDisk(t *testing.T, vmi *v1.VirtualMachineInstance, serial string) string {
	t.Helper()
	out := inGuest(t, vmi, `for d in /sys/block/sd* /sys/block/vd*; do [ -e $d ] || continue; s=$(cat $d/serial 2>/dev/null || tail -c +5 $d/device/vpd_pg80 2>/dev/null); echo "$(basename $d):$s"; done`)
	for _, line := range strings.Fields(out) {
		if dev, s, ok := strings.Cut(line, ":"); ok && s == serial {
			return dev
		}
	}
	return ""
}

// diskThroughput writes then reads 64 MiB of dev in the guest, past its
// page cache, and returns MiB/s of each: the median of three passes
// (the guest's clock is /proc/uptime's, in hundredths of a second).
func diskThroughput(t *testing.T, vmi *v1.VirtualMachineInstance, dev string) (write, read float64) {
	t.Helper()
	const mib = 64
	now := `$(cut -d' ' -f1 /proc/uptime | tr -d .)`
	script := fmt.Sprintf(`t0=%[3]s; dd if=/dev/zero of=/dev/%[1]s bs=1M count=%[2]d conv=fsync 2>/dev/null; t1=%[3]s; `+
		`echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/%[1]s of=/dev/null bs=1M count=%[2]d 2>/dev/null; t2=%[3]s; echo "w=$((t1-t0)) r=$((t2-t1))"`, dev, mib, now)
	var ws, rs []float64
	for i := 0; i < 3; i++ {
		out := inGuest(t, vmi, script)
		m := regexp.MustCompile(`w=(\d+) r=(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("throughput in the guest: %q", out)
		}
		w, _ := strconv.ParseFloat(m[1], 64)
		r, _ := strconv.ParseFloat(m[2], 64)
		ws, rs = append(ws, mib/(max(w, 1)/100)), append(rs, mib/(max(r, 1)/100))
	}
	sort.Float64s(ws)
	sort.Float64s(rs)
	return ws[1], rs[1]
}

// TestHotplugVolume measures `virtctl addvolume` until the disk is in the
// guest (median of 5, each removed again), and the sequential throughput
// of the hotplugged disk against the same claim as a boot-time second
// disk of a VM on the same node (SCSI both), in the same run.
func TestHotplugVolume(t *testing.T) {
	f := benchOnly(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	node := f.Nodes(t)[0]
	pvc := diskClaim(t, f, c, ns, "bench-disk", node, "128Mi", "96M")

	vm := framework.GuestVM(ns, "hotplug-bench", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running", framework.AgentConnected)
	var latencies []time.Duration
	var hotW, hotR float64
	for i := 0; i < runs; i++ {
		start := time.Now()
		virtctlRun(t, f, "addvolume", vm.Name, "--volume-name="+pvc.Name, "-n", ns)
		var dev string
		framework.Eventually(t, 2*time.Minute, "the hotplugged disk in the guest", func() error {
			if dev = hotplugDisk(t, vmi, pvc.Name); dev == "" {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		latencies = append(latencies, time.Since(start))
		if i == runs-1 {
			hotW, hotR = diskThroughput(t, vmi, dev)
		}
		virtctlRun(t, f, "removevolume", vm.Name, "--volume-name="+pvc.Name, "-n", ns)
		framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "volume unplugged", func(got *v1.VirtualMachineInstance) error {
			for _, vs := range got.Status.VolumeStatus {
				if vs.Name == pvc.Name {
					return fmt.Errorf("%s %s", vs.Phase, vs.Message)
				}
			}
			return nil
		})
	}
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm.Name}}, 3*time.Minute)

	boot := framework.GuestVM(ns, "boot-disk-bench", framework.GuestImage, v1.RunStrategyAlways)
	spec := &boot.Spec.Template.Spec
	spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: "data", Serial: pvc.Name, DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}})
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}})
	if err := c.Create(ctx, boot); err != nil {
		t.Fatal(err)
	}
	bootVMI := framework.WaitVMI(t, c, ns, boot.Name, 3*time.Minute, "running", framework.AgentConnected)
	dev := hotplugDisk(t, bootVMI, pvc.Name)
	if dev == "" {
		t.Fatal("the boot-time disk is not in the guest")
	}
	bootW, bootR := diskThroughput(t, bootVMI, dev)
	t.Logf("virtctl addvolume -> disk in the guest: median %s of %v", median(latencies), latencies)
	t.Logf("sequential write MiB/s: hotplugged %.1f, boot-time %.1f: %.2f", hotW, bootW, hotW/bootW)
	t.Logf("sequential read MiB/s: hotplugged %.1f, boot-time %.1f: %.2f", hotR, bootR, hotR/bootR)
}

// diskClaim makes claim name of size on node holding a sparse disk.img of
// image size.
func diskClaim(t *testing.T, f *framework.Framework, c client.Client, ns, name, node, size, image string) *corev1.PersistentVolumeClaim {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"kubevirt.io/provisionOnNode": node}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	mk := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "make-" + name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers: []corev1.Container{{Name: "c", Image: shellImage(t, f), Command: []string{"sh", "-c", "truncate -s " + image + " /data/disk.img"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}
	if err := c.Create(ctx, mk); err != nil {
		t.Fatal(err)
	}
	f.WaitPodSucceeded(t, ns, mk.Name, 2*time.Minute)
	if err := c.Delete(ctx, mk); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// virtctlRun runs KubeVirt's virtctl against the bench's cluster.
func virtctlRun(t *testing.T, f *framework.Framework, args ...string) {
	t.Helper()
	cmd := exec.Command(framework.Virtctl(t), args...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+f.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("virtctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
