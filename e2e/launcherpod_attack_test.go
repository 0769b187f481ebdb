package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestAttackLauncherPodFromItsTenant: the tenant of a launcher Pod runs
// code in it (a guest that escaped QEMU would; here an ephemeral container
// with the Pod's volumes and a shell stands in, which the tenant execs
// into with edit's pods/exec) and attacks the node's handler through the
// volumes they share:
//   - links planted where the handler writes the VM's spec, qcow2 overlay
//     and cloud-init seed, aimed at files of the node: the handler replaces
//     the links, the node's files are unchanged, the VM boots;
//   - the image volume shows the images of this VM only (not a neighbour's
//     cached image) and cannot be written, not even from a container that
//     mounts it read-write;
//   - the launcher's socket and exit record replaced by links to a socket
//     and a file of the node: the handler reaches neither (the socket gets
//     no connection, the VMI is not ended by the planted record);
//   - deleting the VMI leaves no mount of the node's image cache behind.
func TestAttackLauncherPodFromItsTenant(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	admin := f.VMClient(t)
	const tenant = "mallory"
	tc := userClient(t, f, ns, tenant)
	ctx := context.Background()

	// Files and a socket of the node that the tenant's links point at.
	nodeDir, err := os.MkdirTemp("", "tv-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(nodeDir) })
	targets := map[string]string{}
	for _, name := range []string{"launch.json", "disk-1.qcow2", "cloudinit-2.img", "exit.json"} {
		p := filepath.Join(nodeDir, name)
		content := "a file of the node: " + name
		if name == "exit.json" {
			content = `{"code":0,"reason":"PlantedByTheTenant","at":"2026-01-01T00:00:00Z"}`
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		targets[name] = content
	}
	nodeSocket := filepath.Join(nodeDir, "node.sock")
	l, err := net.Listen("unix", nodeSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reached := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			c.Close()
		}
	}()
	// A neighbour's image in the node's cache.
	neighbour := filepath.Join(cluster.NodeRoot, "images", "sha256-e2e-neighbour-"+ns)
	if err := os.MkdirAll(neighbour, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(neighbour) })
	if err := os.WriteFile(filepath.Join(neighbour, "disk.img"), []byte("a neighbour's disk"), 0o644); err != nil {
		t.Fatal(err)
	}

	// An empty claim as the VMI's first volume holds the handler back (it
	// waits for disk.img) while the links are planted.
	// Both on the first node, whose cache and mounts this machine sees.
	first := nodeName(t, f)
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", Annotations: map[string]string{hostpath.AnnProvisionOnNode: first}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}
	if err := tc.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"}, Spec: framework.GuestVMI(framework.GuestImage, "target")}
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: first}
	vmi.Spec.Volumes = append([]v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}, vmi.Spec.Volumes...)
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	if err := tc.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	pod := runningLauncherPod(t, f, vmi)
	tools := func(name string, mounts ...corev1.VolumeMount) {
		t.Helper()
		addShell(t, f, pod, name, mounts)
	}
	tools("mallory", corev1.VolumeMount{Name: launcherpod.VMVolume, MountPath: "/vm"}, corev1.VolumeMount{Name: "volume-0", MountPath: "/disk"})
	sh := func(container, script string) (string, error) {
		t.Helper()
		return tenantExec(t, f, tenant, ns, pod.Name, container, script)
	}
	plant := ""
	for _, name := range []string{"launch.json", "disk-1.qcow2", "cloudinit-2.img"} {
		plant += fmt.Sprintf("ln -sf %s /vm/%s && ", filepath.Join(nodeDir, name), name)
	}
	if out, err := sh("mallory", plant+"dd if=/dev/zero of=/disk/disk.img bs=1M count=8 2>/dev/null && ls -l /vm"); err != nil {
		t.Fatalf("planting links: %v\n%s", err, out)
	}
	// Checked however the test ends: a handler that follows a link may
	// also keep the VM from booting.
	defer func() {
		for name, want := range targets {
			if got, _ := os.ReadFile(filepath.Join(nodeDir, name)); string(got) != want {
				t.Errorf("the node's %s was written through the tenant's link: %q", name, got)
			}
		}
	}()
	running := framework.WaitVMI(t, admin, ns, vmi.Name, 3*time.Minute, "boots although links were planted", framework.AgentConnected)
	vmVolume, err := launcherpod.EmptyDirOnNode(f.KubeletRoot(), pod.UID, launcherpod.VMVolume)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"launch.json", "disk-1.qcow2", "cloudinit-2.img"} {
		if fi, err := os.Lstat(filepath.Join(vmVolume, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s in the Pod's volume: %v %v, want the handler's regular file", name, fi, err)
		}
	}

	// The images volume, seen from a container started now (with the
	// handler's mounts in it) that mounts it read-write.
	tools("mallory-images", corev1.VolumeMount{Name: launcherpod.ImagesVolume, MountPath: "/images"})
	own := vmImages(t, running)
	out, err := sh("mallory-images", "ls /images")
	if err != nil {
		t.Fatalf("listing the images volume: %v\n%s", err, out)
	}
	if seen := strings.Fields(out); !slices.Equal(seen, own) {
		t.Errorf("the Pod sees images %v, its VM uses %v (a neighbour's is %s)", seen, own, filepath.Base(neighbour))
	}
	for _, script := range []string{
		"echo x > /images/" + own[0] + "/planted",
		"for f in $(find /images/" + own[0] + " -type f); do echo x >> $f || exit 1; done",
		"rm -rf /images/" + own[0] + "/*",
	} {
		if out, err := sh("mallory-images", script); err == nil {
			t.Errorf("the tenant changed the node's image cache: %s\n%s", script, out)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(neighbour, "disk.img")); string(got) != "a neighbour's disk" {
		t.Errorf("the neighbour's image changed: %q", got)
	}

	// The launcher's socket, then its exit record, become links to the
	// node's (one at a time: an exit record the handler cannot read stops
	// it short of the socket).
	if out, err := sh("mallory", "rm -f /vm/launcher.sock && ln -s "+nodeSocket+" /vm/launcher.sock"); err != nil {
		t.Fatalf("replacing the socket: %v\n%s", err, out)
	}
	time.Sleep(10 * time.Second) // two of the handler's polls of a running VM, and its retries
	select {
	case <-reached:
		t.Error("the handler connected to the node's socket through the tenant's link")
	default:
	}
	if out, err := sh("mallory", "ln -sf "+filepath.Join(nodeDir, "exit.json")+" /vm/exit.json"); err != nil {
		t.Fatalf("replacing the exit record: %v\n%s", err, out)
	}
	time.Sleep(10 * time.Second)
	got := &v1.VirtualMachineInstance{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vmi), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.Running {
		t.Errorf("the VMI is %s after the tenant linked its exit record to the node's file: %+v", got.Status.Phase, got.Status.Conditions)
	}

	if err := admin.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, admin, got, 2*time.Minute)
	podDir := filepath.Join(f.KubeletRoot(), "pods", string(pod.UID))
	framework.Eventually(t, 2*time.Minute, "no mount is left in the Pod's directory, which the kubelet removes", func() error {
		if m := mountsUnder(t, podDir); len(m) > 0 {
			return fmt.Errorf("mounts left: %v", m)
		}
		if _, err := os.Stat(podDir); !os.IsNotExist(err) {
			return fmt.Errorf("%s still there: %w", podDir, err)
		}
		return nil
	})
}

// runningLauncherPod waits for vmi's launcher Pod to run.
func runningLauncherPod(t *testing.T, f *framework.Framework, vmi *v1.VirtualMachineInstance) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, 2*time.Minute, "the launcher Pod runs", func() error {
		pods, err := f.Kube.CoreV1().Pods(vmi.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(vmi.UID)})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return fmt.Errorf("launcher Pods %d", len(pods.Items))
		}
		pod = &pods.Items[0]
		return nil
	})
	return pod
}

// addShell adds a busybox ephemeral container to pod, mounting some of
// its volumes, and waits for it to run.
func addShell(t *testing.T, f *framework.Framework, pod *corev1.Pod, name string, mounts []corev1.VolumeMount) {
	t.Helper()
	ctx := context.Background()
	p, err := f.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: registryImage(t, f, "tekvirt/busybox"), Command: []string{"sleep", "3600"}, VolumeMounts: mounts}})
	if _, err := f.Kube.CoreV1().Pods(pod.Namespace).UpdateEphemeralContainers(ctx, pod.Name, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "ephemeral container "+name+" runs", func() error {
		p, err := f.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == name && s.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("not running: %+v", p.Status.EphemeralContainerStatuses)
	})
}

// tenantExec runs a shell script in a container of a Pod as user, through
// kubectl exec (pods/exec, which edit grants).
func tenantExec(t *testing.T, f *framework.Framework, user, ns, pod, container, script string) (string, error) {
	t.Helper()
	cmd := exec.Command(f.Bin("kubectl"), "--as="+user, "exec", "-n", ns, pod, "-c", container, "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// vmImages are the cached images the handler noted for vmi, sorted.
func vmImages(t *testing.T, vmi *v1.VirtualMachineInstance) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.VMRoot, string(vmi.UID), "images"))
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Fields(string(data))
	if len(names) == 0 {
		t.Fatal("the handler noted no image for the VM")
	}
	slices.Sort(names)
	return names
}

// mountsUnder lists this machine's mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	return out
}
