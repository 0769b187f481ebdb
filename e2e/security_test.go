package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
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
	if err := tenant.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	vmi = framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "Failed", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Failed {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		return nil
	})
	ready := readyCondition(vmi)
	if ready.Reason != "ContainerDiskInvalid" || !strings.Contains(ready.Message, `backing file "/etc/shadow"`) || !strings.Contains(ready.Message, image) {
		t.Errorf("Ready condition = %+v; want reason ContainerDiskInvalid naming the image and its backing file", ready)
	}
	if slices.Contains(f.Domains(t), ns+"_"+vmi.Name) {
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
	if got.Status.NodeName != "" || got.Status.Phase != v1.Scheduling || slices.Contains(f.Domains(t), ns+"_"+vmi.Name) {
		t.Errorf("forged VMI: node %q, phase %q, domains %v", got.Status.NodeName, got.Status.Phase, f.Domains(t))
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

// TestAttackCloneBypasses: a tenant with edit in their own namespace tries
// every path to a clone of another namespace's disk that admission alone
// did not close: switching a DataVolume's source on update, adding a clone
// template to an existing VM, pointing a DataSource at the victim's PVC,
// and a DataSource re-pointed (by someone allowed to) after the tenant's
// DataVolume was admitted. Each is refused naming the user and the
// permission, and the tenant's namespace ends up with none of the victim's
// data.
func TestAttackCloneBypasses(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	victim, mine := f.Namespace(t), f.Namespace(t)
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}
	secret := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "secret"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, secret, cdiv1.Succeeded)
	marker := []byte("victim-secret-" + rand.String(12))
	if err := os.WriteFile(filepath.Join(volumeDir(t, c, victim, "secret"), "disk.img"), marker, 0o644); err != nil {
		t.Fatal(err)
	}
	tenant := userClient(t, f, mine, "e2e-tenant")
	stolen := cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: victim, Name: "secret"}}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", what, err, want)
		}
	}

	// 1. An upload DataVolume switched to the victim's PVC.
	up := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "up"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := tenant.Create(ctx, up); err != nil {
		t.Fatal(err)
	}
	refused("DataVolume source switched", update(ctx, tenant, up, func() { up.Spec.Source = stolen.DeepCopy() }),
		"spec.source of DataVolume "+mine+"/up cannot change after creation")

	// 2. A clone template added to an existing VM.
	vm := framework.GuestVM(mine, "later", framework.GuestImage, v1.RunStrategyHalted)
	if err := tenant.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	err := update(ctx, tenant, vm, func() {
		vm.Spec.DataVolumeTemplates = []v1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "stolen"},
			Spec: cdiv1.DataVolumeSpec{Source: stolen.DeepCopy(), Storage: &cdiv1.StorageSpec{Resources: size}}}}
	})
	refused("VM update adding a clone template", err, "e2e-tenant may not clone PVC "+victim+"/secret")

	// 3. A DataSource of the tenant's on the victim's PVC.
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "shared"},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: stolen.PVC.DeepCopy()}}}
	refused("DataSource on the victim's PVC", tenant.Create(ctx, ds.DeepCopy()), "e2e-tenant may not point DataSource "+mine+"/shared at PVC "+victim+"/secret")

	// 4. The tenant's DataVolume waits for a DataSource that does not exist
	// yet; an admin then publishes it on the victim's PVC. The clone is
	// checked as the tenant when it would start.
	late := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: mine, Name: "late"},
		Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Name: "shared"}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := tenant.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, late, cdiv1.Failed)
	if msg := readyMessage(late); !strings.Contains(msg, "e2e-tenant may not clone PVC "+victim+"/secret") {
		t.Errorf("the late clone failed with %q; want the tenant and the victim's PVC named", msg)
	}

	// Nothing of the victim's reached the tenant: no DataVolume from the
	// template, no run in the victim's namespace, no disk holding the marker.
	if err := c.Get(ctx, client.ObjectKey{Namespace: mine, Name: "stolen"}, &cdiv1.DataVolume{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused template's DataVolume: %v", err)
	}
	runs, err := f.Tekton.TektonV1().TaskRuns(victim).List(ctx, metav1.ListOptions{LabelSelector: datavolume.CloneTargetNamespaceLabel + "=" + mine})
	if err != nil || len(runs.Items) != 0 {
		t.Errorf("clone senders in the victim's namespace: %d (%v)", len(runs.Items), err)
	}
	for _, pvc := range []string{"up", "late"} {
		claim := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mine, Name: pvc}, claim); err != nil || claim.Spec.VolumeName == "" {
			continue // never bound: nothing was written to it
		}
		if data, err := os.ReadFile(filepath.Join(volumeDir(t, c, mine, pvc), "disk.img")); err == nil && bytes.Contains(data, marker) {
			t.Errorf("PVC %s/%s holds the victim's data", mine, pvc)
		}
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
	if err := tenant.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi = framework.WaitVMI(t, c, ns, vmi.Name, time.Minute, "Failed", func(vmi *v1.VirtualMachineInstance) error {
		if vmi.Status.Phase != v1.Failed {
			return fmt.Errorf("phase %q", vmi.Status.Phase)
		}
		return nil
	})
	if ready := readyCondition(vmi); ready.Reason != "VolumeInvalid" || !strings.Contains(ready.Message, "disk.img is a symbolic link") {
		t.Errorf("Ready condition = %+v; want reason VolumeInvalid naming the link", ready)
	}
	if slices.Contains(f.Domains(t), ns+"_"+vmi.Name) {
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

// TestAttackIdleConnections: anyone on the pod network can open connections
// to the controller and send nothing. With 5,000 such connections open on
// the webhook and 1,000 on the upload proxy, the webhook still admits a
// good VM and refuses a bad one by name; and the servers close the idle
// connections themselves (the webhook within its 32 s TLS handshake limit,
// the upload proxy within its 10 s), so they cannot pin descriptors.
func TestAttackIdleConnections(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	pods, err := f.Kube.CoreV1().Pods(ctrlconfig.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tekvirt-controller"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the controller pod: %v", err)
	}
	ip := pods.Items[0].Status.PodIP
	webhook := openIdle(t, net.JoinHostPort(ip, "9443"), 5000)
	proxy := openIdle(t, net.JoinHostPort(ip, "8444"), 1000)
	opened := time.Now()

	start := time.Now()
	good := framework.GuestVM(ns, "admitted", framework.GuestImage, v1.RunStrategyHalted)
	if err := c.Create(ctx, good); err != nil {
		t.Errorf("a good VM with 5,000 idle connections open: %v", err)
	}
	bad := framework.GuestVM(ns, "refused", framework.GuestImage, v1.RunStrategyHalted)
	bad.Spec.Template.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}}}
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "interfaces[0].sriov") {
		t.Errorf("a bad VM with 5,000 idle connections open: err = %v", err)
	}
	t.Logf("admission with %d+%d idle connections open: %s", len(webhook), len(proxy), time.Since(start).Round(time.Millisecond))

	for _, s := range []struct {
		name  string
		conns []net.Conn
		limit time.Duration
	}{{"upload proxy", proxy, 10 * time.Second}, {"webhook", webhook, 32 * time.Second}} {
		open := stillOpen(s.conns, opened.Add(s.limit+15*time.Second))
		t.Logf("%s: %d of %d idle connections still open %s after they were opened", s.name, open, len(s.conns), time.Since(opened).Round(time.Second))
		if open > 0 {
			t.Errorf("%s keeps %d idle connections open past its %s limit", s.name, open, s.limit)
		}
	}
}

// openIdle opens n TCP connections to addr that send nothing.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d to %s: %v", len(conns)+1, addr, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// stillOpen waits until deadline for the server to close conns and says
// how many it did not.
func stillOpen(conns []net.Conn, deadline time.Time) int {
	open := make(chan bool, len(conns))
	for _, c := range conns {
		go func() {
			_ = c.SetReadDeadline(deadline)
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			open <- errors.As(err, &ne) && ne.Timeout()
		}()
	}
	n := 0
	for range conns {
		if <-open {
			n++
		}
	}
	return n
}

// TestAttackStaleUploadToken: an upload token outlives the DataVolume it
// was issued for; one for a deleted DataVolume is refused by the DataVolume
// of the same name made later (tokens name the PVC's UID), which nothing
// is written to, and a token of its own works.
func TestAttackStaleUploadToken(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	newDV := func() *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}}
	}
	first := newDV()
	if err := c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, first, cdiv1.UploadReady)
	stale := uploadToken(t, c, ns, first.Name)
	if err := c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	framework.WaitGone(t, c, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Name}}, time.Minute)
	second := newDV()
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, second, cdiv1.UploadReady)
	proxy := uploadProxy(t, f, c)
	data := bytes.Repeat([]byte("stale!"), 4096)
	if code, msg := proxy.post(t, "/v1beta1/upload", stale, "", bytes.NewReader(data)); code != http.StatusUnauthorized || !strings.Contains(msg, "for an earlier PVC "+ns+"/target") {
		t.Errorf("the deleted DataVolume's token: got %d %q, want 401 naming the earlier PVC", code, msg)
	}
	if entries := volumeFiles(t, c, ns, second.Name); len(entries) != 0 {
		t.Errorf("the refused upload wrote %v", entries)
	}
	if code, msg := proxy.post(t, "/v1beta1/upload", uploadToken(t, c, ns, second.Name), "", bytes.NewReader(data)); code != http.StatusOK {
		t.Fatalf("the new DataVolume's own token: got %d %q", code, msg)
	}
	waitDVPhase(t, c, second, cdiv1.Succeeded)
}
