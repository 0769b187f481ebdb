package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/vmdefaults"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// kubectlApply pipes manifest into `kubectl apply -n ns -f -` (with
// --as and the user when given), as a user pipes virtctl's output.
func kubectlApply(f *framework.Framework, ns, manifest string, as ...string) (string, error) {
	args := []string{"--kubeconfig", f.Kubeconfig, "apply", "-n", ns, "-f", "-"}
	for _, u := range as {
		args = append(args, "--as", u)
	}
	cmd := exec.Command(f.Bin("kubectl"), args...)
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestVirtctlCreateVM: what KubeVirt's `virtctl create vm` prints, applied
// as printed, runs: a containerDisk with cloud-init user data and
// --memory (volumes without disks, no network: the defaults are written
// into the stored VM and VMI, the seed is read from its default SATA
// disk), an instancetype and a preference, a DataSource whose labels name
// the instancetype and preference (inferred, virtctl's default), a PVC
// and a cloned PVC; another tenant cannot infer from this namespace's
// DataSources. (Access credentials: TestAccessCredentials.)
func TestVirtctlCreateVM(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	apply := func(args ...string) {
		t.Helper()
		if out, err := kubectlApply(f, ns, virtctl(t, append([]string{"create", "vm"}, args...)...)); err != nil {
			t.Fatalf("virtctl create vm %s | kubectl apply: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	userData := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nhostname: vvm-guest\n"))
	apply("--name=vvm", "--volume-containerdisk=src:"+framework.GuestImage, "--cloud-init-user-data="+userData, "--memory=256Mi")
	apply("--name=vit", "--instancetype=u1.nano", "--preference=tekvirt.guest", "--volume-containerdisk=src:"+framework.GuestImage)

	// The defaults, in the stored VM as KubeVirt's admission writes them.
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vvm"}, vm); err != nil {
		t.Fatal(err)
	}
	spec := vm.Spec.Template.Spec
	sata := func(d v1.Disk) bool { return d.Disk != nil && d.Disk.Bus == v1.DiskBusSATA }
	if d := spec.Domain.Devices.Disks; len(d) != 2 || d[0].Name != "vvm-containerdisk-0" || d[1].Name != "cloudinitdisk" || !sata(d[0]) || !sata(d[1]) {
		t.Errorf("VM disks %+v, want one SATA disk per volume", d)
	}
	if i, n := spec.Domain.Devices.Interfaces, spec.Networks; len(i) != 1 || i[0].Name != "default" || i[0].Masquerade == nil || len(n) != 1 || n[0].Pod == nil {
		t.Errorf("VM interfaces %+v, networks %+v; want the pod network with masquerade", i, n)
	}
	if r := spec.Domain.Resources.Requests[corev1.ResourceMemory]; r.String() != "256Mi" || spec.Domain.Machine == nil || spec.Domain.Machine.Type != "pc" ||
		spec.Domain.Firmware == nil || spec.Domain.Firmware.UUID != vmdefaults.FirmwareUUID("vvm") {
		t.Errorf("VM memory request %s, machine %+v, firmware %+v", r.String(), spec.Domain.Machine, spec.Domain.Firmware)
	}
	withIT := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vit"}, withIT); err != nil {
		t.Fatal(err)
	}
	if s := withIT.Spec.Template.Spec; s.Domain.Memory != nil || len(s.Networks) != 0 || s.Domain.Firmware == nil || s.Domain.Firmware.UUID == "" {
		t.Errorf("a VM with an instancetype gets its firmware UUID only; template %+v", s)
	}

	// Both boot; the VMIs carry the pod network tools read from the spec
	// (kubevirt-tekton-tasks' execute-in-vm finds the guest's address by it).
	vmis := map[string]*v1.VirtualMachineInstance{}
	for _, name := range []string{"vvm", "vit"} { // both boot meanwhile
		vmis[name] = framework.WaitVMI(t, c, ns, name, 4*time.Minute, "running with its agent", framework.AgentConnected)
	}
	for name, vmi := range vmis {
		if n := vmi.Spec.Networks; len(n) != 1 || n[0].Name != "default" || n[0].Pod == nil || len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
			t.Errorf("VMI %s: networks %+v, interfaces %+v", name, n, vmi.Status.Interfaces)
		}
	}
	if d := vmis["vit"].Spec.Domain.Devices.Disks; len(d) != 1 || d[0].Disk == nil || d[0].Disk.Bus != v1.DiskBusVirtio {
		t.Errorf("VMI vit disks %+v, want the preference's virtio bus on the disk added for its volume", d)
	}
	info := &v1.VirtualMachineInstanceGuestAgentInfo{}
	if out := virtctl(t, "guestosinfo", "vvm", "-n", ns); json.Unmarshal([]byte(out), info) != nil || info.Hostname != "vvm-guest" {
		t.Errorf("virtctl guestosinfo vvm (the hostname from the cloud-init seed on its SATA disk):\n%s", out)
	}

	// virtctl infers the instancetype and preference from a DataSource or
	// PVC volume unless told otherwise: the labels of the DataSource name
	// them; the PVC has none, so the matchers go.
	golden := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "golden"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := c.Create(ctx, golden); err != nil {
		t.Fatal(err)
	}
	ds := &cdiv1.DataSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "labelled", Labels: map[string]string{
			instancetype.DefaultInstancetypeLabel: "u1.nano", instancetype.DefaultPreferenceLabel: "tekvirt.guest"}},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: "golden"}}},
	}
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	apply("--name=vds", "--run-strategy=Halted", "--volume-import=type:ds,src:"+ns+"/labelled,size:1Gi")
	inferred := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "vds"}, inferred); err != nil {
		t.Fatal(err)
	}
	if it, p := inferred.Spec.Instancetype, inferred.Spec.Preference; it == nil || it.Name != "u1.nano" || it.InferFromVolume != "" ||
		p == nil || p.Name != "tekvirt.guest" || inferred.Spec.Template.Spec.Domain.Memory != nil {
		t.Errorf("inferred: instancetype %+v, preference %+v, memory %+v; want the DataSource's, virtctl's fallback memory gone", it, p, inferred.Spec.Template.Spec.Domain.Memory)
	}
	apply("--name=vpvc", "--run-strategy=Halted", "--memory=256Mi", "--volume-pvc=src:golden")
	apply("--name=vclone", "--run-strategy=Halted", "--memory=256Mi", "--volume-import=type:pvc,src:"+ns+"/golden,size:1Gi")
	for _, name := range []string{"vpvc", "vclone"} {
		got := &v1.VirtualMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if d := got.Spec.Template.Spec.Domain.Devices.Disks; len(d) != 1 || !sata(d[0]) || len(got.Spec.Template.Spec.Networks) != 1 {
			t.Errorf("VM %s: disks %+v, networks %+v", name, d, got.Spec.Template.Spec.Networks)
		}
	}

	// Inference reads no other tenant's objects: an editor of another
	// namespace naming this one's DataSource, or one that does not exist,
	// gets the same refusal, which tells nothing of either.
	other := f.Namespace(t)
	bindUser(t, f, other, "vm-tenant", "edit")
	for _, src := range []string{"labelled", "no-such-source"} {
		manifest := virtctl(t, "create", "vm", "--name=steal", "--run-strategy=Halted", "--volume-import=type:ds,src:"+ns+"/"+src+",size:1Gi")
		out, err := kubectlApply(f, other, manifest, "vm-tenant")
		if err == nil || !strings.Contains(out, "cloning needs create on datavolumes/source") || strings.Contains(out, "u1.nano") || strings.Contains(out, "not found") {
			t.Errorf("another tenant inferring from DataSource %s/%s: %v\n%s", ns, src, err, out)
		}
	}
}
