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
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// TestRestrictedNamespace: in a namespace enforcing Pod Security
// "restricted", everything tekvirt makes there runs: DataVolumes imported
// over HTTP, pulled by the node from a registry, cloned and uploaded with
// `tekvirt image-upload` (their TaskRuns' Pods), and a VM on the clone
// (written by a task's user, given to the launcher's), whose launcher Pod
// runs libvirtd and QEMU as KubeVirt's qemu user without capabilities;
// the catalog's execute-in-vm, run from the namespace, runs a command in
// the guest, and the VM stops.
func TestRestrictedNamespace(t *testing.T) {
	t.Parallel() // mostly waiting on Pods and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	podSecurity(t, f, ns, "restricted")
	ctx := context.Background()
	dv := func(name string, src cdiv1.DataVolumeSource) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: cdiv1.DataVolumeSpec{Source: &src,
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}}}}
	}
	imported := dv("imported", cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: serveGuest(t, f) + "/guest.qcow2.xz"}})
	pulled := dv("pulled", cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{
		URL: ptr("docker://" + framework.GuestImage), PullMethod: ptr(cdiv1.RegistryPullNode)}})
	cloned := dv("cloned", cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: imported.Name}})
	// The clone is created with its source, as a manifest holding both
	// is applied: it waits for the source's import.
	for _, d := range []*cdiv1.DataVolume{imported, pulled, cloned} {
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	out := tekvirt(t, f, "image-upload", "dv", "uploaded", "-n", ns, "--size=128Mi", "--image-path="+filepath.Join(f.GuestDir(), "guest.qcow2.xz"))
	if !strings.Contains(out, "DataVolume "+ns+"/uploaded Succeeded") {
		t.Errorf("image-upload in a restricted namespace:\n%s", out)
	}
	for _, d := range []*cdiv1.DataVolume{imported, pulled, cloned} {
		waitDVPhase(t, c, d, cdiv1.Succeeded)
	}

	vm := framework.GuestVM(ns, "restricted", framework.GuestImage, v1.RunStrategyAlways)
	tmpl := &vm.Spec.Template.Spec
	tmpl.Volumes[0].VolumeSource = v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: cloned.Name}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmi := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running with its agent", framework.AgentConnected)
	checkUnprivilegedQEMU(t, domain.Name(vmi))

	// The catalog's execute-in-vm from the namespace, through the cluster
	// resolver, as a ServiceAccount of the namespace bound to its role.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "execute-in-vm-task"}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "execute-in-vm-task"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "execute-in-vm-task"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	for _, o := range []client.Object{sa, rb} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr := &pipelinev1.TaskRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "execute-in-vm-"}, Spec: pipelinev1.TaskRunSpec{
		TaskRef: clusterRef(framework.CatalogNamespace, "execute-in-vm"), ServiceAccountName: sa.Name,
		Params: pipelinev1.Params{{Name: "vmName", Value: str(vm.Name)}, {Name: "script", Value: str("echo restricted-`hostname`")}}}}
	framework.NewTaskRunRunner(t, f, tr).CreateTaskRun().ExpectSuccess().ExpectLogs("restricted-" + vm.Name)

	tekvirt(t, f, "stop", vm.Name, "-n", ns)
	framework.WaitGone(t, c, vmi, 2*time.Minute)
	waitPrintableStatus(t, c, vm, v1.VirtualMachineStatusStopped, 30*time.Second)
}

// checkUnprivilegedQEMU checks, on this machine (the nodes' processes run
// here), that the QEMU of domain runs as the launcher Pod's user with no
// capabilities, unable to gain privileges, under a seccomp filter.
func checkUnprivilegedQEMU(t *testing.T, domain string) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", qemuOf(t, domain)))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	user := fmt.Sprint(launcherpod.User)
	for k, want := range map[string]string{
		"Uid": strings.Repeat(user+" ", 3) + user, "CapEff": "0000000000000000", "CapPrm": "0000000000000000",
		"CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
	} {
		if fields[k] != want {
			t.Errorf("QEMU of %s: %s %q, want %q", domain, k, fields[k], want)
		}
	}
}
