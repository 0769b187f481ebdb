package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// preferNode makes node the scheduler's first choice for spec's Pod, so
// that landing elsewhere shows a hard rule (spread, volume) decided.
func preferNode(spec *v1.VirtualMachineInstanceSpec, node string) {
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}}
}

// qemuCgroup is the memory cgroup of the QEMU of VMI ns/name.
func qemuCgroup(t *testing.T, ns, name string) string {
	t.Helper()
	pid := framework.QEMUPid(ns + "_" + name)
	if pid == 0 {
		t.Fatalf("no QEMU for %s/%s", ns, name)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && (parts[1] == "memory" || parts[1] == "") {
			return parts[2]
		}
	}
	t.Fatalf("no memory cgroup in %s", data)
	return ""
}

// TestVMOnSecondNode: a VM whose nodeSelector names the second node runs
// there: its launcher Pod is bound to it, its QEMU is in that node's
// kubelet's cgroups (none of the first node's), its address is from that
// node's pod subnet, and execute-in-vm reaches it through that node's
// handler.
func TestVMOnSecondNode(t *testing.T) {
	f := framework.New(t)
	_, second := f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "on-second", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: second}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running", framework.AgentConnected)
	pod := f.LauncherPod(t, vmi)
	if vmi.Status.NodeName != second || pod.Spec.NodeName != second {
		t.Fatalf("VMI on %q, its launcher Pod on %q, want %q", vmi.Status.NodeName, pod.Spec.NodeName, second)
	}
	node, err := f.Kube.CoreV1().Nodes().Get(ctx, second, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cg := qemuCgroup(t, ns, vm.Name); !strings.HasPrefix(cg, "/tekvirt-node") || !strings.Contains(cg, "/pod"+string(pod.UID)+"/") {
		t.Errorf("QEMU's cgroup %s is not the launcher Pod %s's under the second node's kubelet", cg, pod.UID)
	}
	if len(vmi.Status.Interfaces) == 0 || !strings.HasPrefix(vmi.Status.Interfaces[0].IP, "10.244.1.") {
		t.Errorf("VMI interfaces %+v: want an address from the second node's pod subnet", vmi.Status.Interfaces)
	}
	// Dual-stack: one address of each family, IPv4 first.
	var internal []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if len(internal) != 2 || !strings.HasPrefix(internal[0], "10.245.0.") || !strings.HasPrefix(internal[1], "fd00:10:245::") {
		t.Errorf("second node's addresses %v are not the testbed's node range's (10.245.0.<i>, fd00:10:245::<i>)", internal)
	}
	f.BindTaskRole(t, ns, "execute-in-vm")
	framework.NewTaskRunRunner(t, f, framework.ExecuteInVMTaskRun(ns, vm.Name, "hostname", "2m")).
		CreateTaskRun().ExpectSuccess().ExpectLogs(vm.Name)
}

// TestTopologySpreadAcrossNodes: two VMs spread over kubernetes.io/hostname
// (maxSkew 1, DoNotSchedule) land on different nodes, although both prefer
// the first.
func TestTopologySpreadAcrossNodes(t *testing.T) {
	f := framework.New(t)
	first, _ := f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	var nodes []string
	for _, name := range []string{"spread-a", "spread-b"} {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "spread"}},
			Spec: framework.GuestVMI(framework.GuestImage, name)}
		preferNode(&vmi.Spec, first)
		vmi.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
		}}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		// One after the other: the second is placed knowing the first.
		got := framework.WaitVMI(t, c, ns, name, 3*time.Minute, "running", framework.AgentConnected)
		nodes = append(nodes, got.Status.NodeName)
	}
	if nodes[0] == nodes[1] {
		t.Errorf("both VMs on %s despite the spread constraint", nodes[0])
	}
}

// TestNodeLocalDataVolume: a DataVolume asked on the second node
// (kubevirt.io/provisionOnNode, as the hostpath provisioner reads it) is
// imported into a volume pinned there, its disk in that node's directory
// and no other; a VM booting from it starts on that node although it
// prefers the first.
func TestNodeLocalDataVolume(t *testing.T) {
	f := framework.New(t)
	first, second := f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	dv := &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local-disk", Annotations: map[string]string{hostpath.AnnProvisionOnNode: second}},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: serveGuest(t, f) + "/guest.qcow2.xz"}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}}},
	}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(dv), pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if got := hostpath.VolumeNode(pv); got != second {
		t.Fatalf("volume %s pinned to %q, want %q", pv.Name, got, second)
	}
	disk := filepath.Join(framework.VolumeDir(pv), "disk.img")
	if st, err := os.Stat(framework.HostPath(second, disk)); err != nil || st.Size() == 0 {
		t.Errorf("the disk is not in the second node's directory: %v", err)
	}
	if _, err := os.Stat(framework.HostPath(first, framework.VolumeDir(pv))); err == nil {
		t.Errorf("the first node has a directory for %s too", pv.Name)
	}
	if !strings.HasPrefix(framework.HostPath(second, disk), cluster.NodesRoot+"/") {
		t.Errorf("second node's files at %s, not under %s", framework.HostPath(second, disk), cluster.NodesRoot)
	}

	vm := framework.GuestVM(ns, "local-vm", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Volumes[0] = v1.Volume{Name: "containerdisk", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: dv.Name}}}
	preferNode(&vm.Spec.Template.Spec, first)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "booted from the local DataVolume", framework.AgentConnected)
	if vmi.Status.NodeName != second {
		t.Errorf("VM with a volume on %s started on %s", second, vmi.Status.NodeName)
	}
}

// TestWaitForFirstConsumerClass: with a StorageClass of the hostpath
// provisioner that waits for the first consumer, a claim gets no volume
// until a Pod uses it, a VM's launcher Pod pinned to the second node has
// its claim's volume made there, and a DataVolume of that class is
// imported (its run's Pod being the first consumer).
func TestWaitForFirstConsumerClass(t *testing.T) {
	f := framework.New(t)
	_, second := f.TwoNodes(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-local-" + ns}, Provisioner: hoststorage.DriverName, VolumeBindingMode: &wffc}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class.Name, Resources: size,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil || pvc.Spec.VolumeName != "" {
		t.Fatalf("a claim no Pod uses got volume %q (%v)", pvc.Spec.VolumeName, err)
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "consumer"}, Spec: framework.GuestVMI(framework.GuestImage, "consumer")}
	vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: second}
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}})
	vmi.Spec.Domain.Devices.Disks = append(vmi.Spec.Domain.Devices.Disks, v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}})
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the claim bound on the VM's node", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil || pvc.Spec.VolumeName == "" {
			return fmt.Errorf("claim %s, volume %q: %w", pvc.Status.Phase, pvc.Spec.VolumeName, err)
		}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return err
		}
		if n := hostpath.VolumeNode(pv); n != second {
			t.Fatalf("volume %s on %q, the VM's Pod on %q", pv.Name, n, second)
		}
		return nil
	})

	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-disk"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: serveGuest(t, f) + "/guest.qcow2.xz"}},
			Storage: &cdiv1.StorageSpec{StorageClassName: &class.Name, Resources: size}}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	if got := volumeDisk(t, c, ns, dv.Name); len(got) == 0 {
		t.Error("the DataVolume's disk is empty")
	}
}
