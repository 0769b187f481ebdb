package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/e2e/ocibuild"
)

// The scenarios in this file are attacks a user with edit in one namespace
// can try; each asserts the attack is refused with a message naming the
// cause and that nothing was read or written.

// TestAttackVolumeNameTraversal: a volume named like a path
// ("x/../../../tmp/owned") would make the node write outside the VM's
// directory; the VMI and the VM are refused and no file appears.
func TestAttackVolumeNameTraversal(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	tenant := userClient(t, f, ns, "e2e-tenant")
	target := "tekvirt-e2e-owned-" + rand.String(6)
	name := "x/../../../../../../../../../tmp/" + target
	spec := framework.GuestVMI(framework.GuestImage, "traversal")
	spec.Volumes = append(spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
		CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}})
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, v1.Disk{Name: name,
		DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	ctx := context.Background()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "traversal"}, Spec: spec}
	err := tenant.Create(ctx, vmi)
	want := fmt.Sprintf("spec.volumes[%d].name %q is not a valid name", len(spec.Volumes)-1, name)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("VMI with a path as volume name: err = %v, want %q", err, want)
	}
	vm := framework.GuestVM(ns, "traversal", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec = spec
	err = tenant.Create(ctx, vm)
	if err == nil || !strings.Contains(err.Error(), "spec.template."+want) {
		t.Errorf("VM with a path as volume name: err = %v, want %q", err, "spec.template."+want)
	}
	time.Sleep(2 * time.Second) // what a handler would have written by now
	for _, p := range []string{"/tmp/" + target, "/tmp/" + target + ".img", "/tmp/" + target + ".qcow2"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v)", p, err)
		}
	}
}

// TestAttackContainerDiskBackingFile: a containerDisk whose qcow2 names a
// node file as its backing file (/etc/shadow) would hand that file to QEMU;
// the VMI fails naming the backing file before any domain starts.
func TestAttackContainerDiskBackingFile(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	tenant := userClient(t, f, ns, "e2e-tenant")
	evil := filepath.Join(t.TempDir(), "evil.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", "/etc/shadow", evil).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	image := cluster.RegistryAddr + "/e2e/backed-by-shadow:" + rand.String(5)
	if _, err := ocibuild.Push(ocibuild.Spec{Files: map[string]ocibuild.File{
		"/disk": {Dir: true, Mode: 0o755}, "/disk/evil.qcow2": {Source: evil, Mode: 0o644},
	}}, image); err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shadow"}, Spec: framework.GuestVMI(image, "shadow")}
	ready := failVMI(t, tenant, c, vmi)
	if ready.Reason != "ContainerDiskInvalid" || !strings.Contains(ready.Message, `backing file "/etc/shadow"`) || !strings.Contains(ready.Message, image) {
		t.Errorf("Ready condition = %+v; want reason ContainerDiskInvalid naming the image and its backing file", ready)
	}
	if framework.QEMUPid(ns+"_"+vmi.Name) != 0 {
		t.Errorf("a domain was started for %s", vmi.Name)
	}
}

// TestAttackForgedVMIStatus: a VMI created with a forged status (placed on
// the node, phase Scheduled) and a nodeSelector no node matches would skip
// placement and run; status goes through its subresource, which a tenant
// may not write, so the forged status is dropped and the VMI stays
// unschedulable; a later spec change to make it fit is refused.
func TestAttackForgedVMIStatus(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	tenant := userClient(t, f, ns, "e2e-tenant")
	ctx := context.Background()
	nodes, err := f.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	node := nodes.Items[0].Name
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}, Spec: framework.GuestVMI(framework.GuestImage, "forged")}
	vmi.Spec.NodeSelector = map[string]string{"e2e.tekvirt.io/no-such-node": "true"}
	vmi.Status = v1.VirtualMachineInstanceStatus{NodeName: node, Phase: v1.Scheduled}
	if err := tenant.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	got := framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "unschedulable", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Scheduling {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // a handler that took the forged node would have started it by now
	if err := c.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.NodeName != "" || got.Status.Phase != v1.Scheduling || framework.QEMUPid(ns+"_"+vmi.Name) != 0 {
		t.Errorf("forged VMI: node %q, phase %q, QEMU %d", got.Status.NodeName, got.Status.Phase, framework.QEMUPid(ns+"_"+vmi.Name))
	}
	forged := got.DeepCopy()
	forged.Status.NodeName, forged.Status.Phase = node, v1.Scheduled
	if err := tenant.Status().Update(ctx, forged); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant's status update: err = %v, want forbidden", err)
	}
	err = update(ctx, tenant, got.DeepCopy(), func() {})
	if err != nil {
		t.Errorf("a tenant's update that keeps the spec: %v", err)
	}
	fit := got.DeepCopy()
	err = update(ctx, tenant, fit, func() { fit.Spec.NodeSelector = nil })
	if want := "spec.nodeSelector of VirtualMachineInstance " + ns + "/forged cannot change after creation"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a tenant's spec update: err = %v, want %q", err, want)
	}
}

// update reads obj afresh, changes it and writes it back as c, again when
// a controller wrote it in between.
func update(ctx context.Context, c client.Client, obj client.Object, change func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return c.Update(ctx, obj)
	})
}

// TestAttackSymlinkedDisk: a pod of the tenant's that mounts their PVC
// replaces disk.img with a symlink to a node file; a VMI on that PVC would
// hand the node's file to QEMU (and libvirt would chown it to QEMU's user).
// The VMI fails naming the link, no domain starts and the file is untouched.
func TestAttackSymlinkedDisk(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	tenant := userClient(t, f, ns, "e2e-tenant")
	ctx := context.Background()
	var before syscall.Stat_t
	if err := syscall.Stat("/etc/shadow", &before); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "disk"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plant-link"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "ln", Image: registryImage(t, f, "tekvirt/busybox"),
				Command:      []string{"ln", "-s", "/etc/shadow", "/disk/disk.img"},
				VolumeMounts: []corev1.VolumeMount{{Name: "disk", MountPath: "/disk"}}}},
			Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}
	if err := tenant.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.WaitPodSucceeded(t, ns, pod.Name, 2*time.Minute)
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "linked"}, Spec: framework.GuestVMI(framework.GuestImage, "linked")}
	vmi.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	if ready := failVMI(t, tenant, c, vmi); ready.Reason != "VolumeInvalid" || !strings.Contains(ready.Message, "disk.img is a symbolic link") {
		t.Errorf("Ready condition = %+v; want reason VolumeInvalid naming the link", ready)
	}
	if framework.QEMUPid(ns+"_"+vmi.Name) != 0 {
		t.Errorf("a domain was started for %s", vmi.Name)
	}
	var after syscall.Stat_t
	if err := syscall.Stat("/etc/shadow", &after); err != nil {
		t.Fatal(err)
	}
	if after.Uid != before.Uid || after.Gid != before.Gid || after.Mode != before.Mode {
		t.Errorf("/etc/shadow changed: uid %d->%d gid %d->%d mode %o->%o", before.Uid, after.Uid, before.Gid, after.Gid, before.Mode, after.Mode)
	}
}

// TestAttackExecAddress: the handler's exec address is an annotation on
// the VMI, which its owner may edit. Pointed at a server of the tenant's,
// execute-in-vm refuses the server (its certificate is not the VMI node's
// from the cluster CA) and sends it nothing; and the token execute-in-vm
// sends is for the handler's audience only: the handler refuses a plain
// service account token.
func TestAttackExecAddress(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "exec", framework.GuestImage, v1.RunStrategyAlways)
	// On the first node: the tenant's server listens on its node's address,
	// which only the first node shares with this machine's network.
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: nodeName(t, f)}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 2*time.Minute, "running with its agent", framework.AgentConnected)
	handlerAddr := vmi.Annotations["tekvirt.io/handler-address"]
	host, _, err := net.SplitHostPort(handlerAddr)
	if err != nil {
		t.Fatalf("handler address %q: %v", handlerAddr, err)
	}

	// The tenant's server, on the node address, logging what reaches it.
	var requests atomic.Int32
	trap := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		t.Logf("the tenant's server got %s with Authorization %q", r.URL.Path, r.Header.Get("Authorization"))
	}))
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	trap.Listener = l
	trap.StartTLS()
	defer trap.Close()
	tenant := userClient(t, f, ns, "e2e-tenant")
	if err := update(ctx, tenant, vmi, func() { vmi.Annotations["tekvirt.io/handler-address"] = l.Addr().String() }); err != nil {
		t.Fatalf("the tenant edits the annotation: %v", err)
	}
	f.BindTaskRole(t, ns, "execute-in-vm")
	framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, vm.Name, "true", "1m")).
		CreateTaskRun().ExpectFailure("failed to verify certificate")
	if n := requests.Load(); n != 0 {
		t.Errorf("execute-in-vm sent %d requests to the tenant's server", n)
	}

	// The handler itself refuses a token that is not for its audience.
	tok, err := f.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 30 * time.Second} //nolint:gosec // only the handler's answer is checked
	req, _ := http.NewRequest(http.MethodPost, "https://"+handlerAddr+"/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/virtualmachineinstances/exec/exec", strings.NewReader(`{"command":["true"]}`))
	req.Header.Set("Authorization", "Bearer "+tok.Status.Token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(msg), "not accepted for audience tekvirt-handler") {
		t.Errorf("a plain service account token: got %d %q, want 401 naming the audience", resp.StatusCode, msg)
	}
}

// TestAttackContainerDiskBomb: a containerDisk whose compressed layer
// expands to more than the node allows one image (a sparse file of zeros
// compresses to almost nothing) fails the VMI as ContainerDiskTooLarge,
// and nothing of it stays in the node's cache.
func TestAttackContainerDiskBomb(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	bomb := filepath.Join(t.TempDir(), "bomb.raw")
	if err := os.WriteFile(bomb, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(bomb, cluster.ContainerDiskMaxBytes+64<<20); err != nil {
		t.Fatal(err)
	}
	image := cluster.RegistryAddr + "/e2e/bomb:" + rand.String(5)
	pushed, err := ocibuild.Push(ocibuild.Spec{Files: map[string]ocibuild.File{
		"/disk": {Dir: true, Mode: 0o755}, "/disk/bomb.raw": {Source: bomb, Mode: 0o644},
	}}, image)
	if err != nil {
		t.Fatal(err)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bomb"}, Spec: framework.GuestVMI(image, "bomb")}
	// On the first node, whose cache this machine sees.
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: nodeName(t, f)}
	if ready := failVMI(t, userClient(t, f, ns, "e2e-tenant"), c, vmi); ready.Reason != "ContainerDiskTooLarge" || !strings.Contains(ready.Message, "more than 1073741824 bytes") {
		t.Errorf("Ready condition = %+v; want reason ContainerDiskTooLarge naming the cap", ready)
	}
	_, digest, _ := strings.Cut(pushed, "@sha256:")
	// A retry of the fetch may still be stopping when the VMI reports failed.
	framework.Eventually(t, 30*time.Second, "nothing of the refused image in the node's cache", func() error {
		left, _ := filepath.Glob(filepath.Join(cluster.NodeRoot, "images", digest))
		fetches, _ := filepath.Glob(filepath.Join(cluster.NodeRoot, "images", ".fetch-*"))
		if len(left)+len(fetches) != 0 {
			return fmt.Errorf("left %v %v", left, fetches)
		}
		return nil
	})
}
