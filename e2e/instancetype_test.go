package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestInstancetypeAndPreference: the operator installed the u1 series and
// the guest's preference; a VM that names a namespaced instancetype and
// that preference boots sized by them (memory reaches the launcher Pod's
// request, the disk bus comes from the preference) and keeps its captured
// sizing across an edit of the instancetype and a restart. A VM that also
// sets its CPU, or names a preference that does not exist, is refused
// naming why, and nothing is created.
func TestInstancetypeAndPreference(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	if err := instancetypev1beta1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{
		&instancetypev1beta1.VirtualMachineClusterInstancetype{ObjectMeta: metav1.ObjectMeta{Name: "u1.nano"}},
		&instancetypev1beta1.VirtualMachineClusterInstancetype{ObjectMeta: metav1.ObjectMeta{Name: "u1.8xlarge"}},
		&instancetypev1beta1.VirtualMachineClusterPreference{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt.guest"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatalf("the operator's common instancetypes: %v", err)
		}
	}
	it := &instancetypev1beta1.VirtualMachineInstancetype{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{CPU: instancetypev1beta1.CPUInstancetype{Guest: 1},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("384Mi")}}}
	if err := c.Create(ctx, it); err != nil {
		t.Fatal(err)
	}
	vm := framework.GuestVM(ns, "sized", framework.GuestImage, v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
	for i := range vm.Spec.Template.Spec.Domain.Devices.Disks {
		vm.Spec.Template.Spec.Domain.Devices.Disks[i].Disk.Bus = ""
	}
	vm.Spec.Instancetype = &v1.InstancetypeMatcher{Kind: "VirtualMachineInstancetype", Name: it.Name}
	vm.Spec.Preference = &v1.PreferenceMatcher{Name: "tekvirt.guest"}

	bad := vm.DeepCopy()
	bad.Name = "also-sized"
	bad.Spec.Template.Spec.Domain.CPU = &v1.CPU{Cores: 2}
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.template.spec.domain.cpu conflict with the selected instancetype") {
		t.Errorf("a VM sizing its CPU and naming an instancetype: %v", err)
	}
	bad = vm.DeepCopy()
	bad.Name = "no-preference"
	bad.Spec.Preference.Name = "nope"
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "VirtualMachineClusterPreference nope not found") {
		t.Errorf("a VM naming a missing preference: %v", err)
	}
	// Another tenant's namespaced instancetype is not found from here.
	other := f.Namespace(t)
	bad = vm.DeepCopy()
	bad.Namespace, bad.Name = other, "borrowed"
	if err := c.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "VirtualMachineInstancetype small not found") {
		t.Errorf("a VM naming another namespace's instancetype: %v", err)
	}
	for _, name := range []string{"also-sized", "no-preference"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1.VirtualMachine{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused VM %s: %v, want not found", name, err)
		}
	}

	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	sized := func(want uint32) {
		t.Helper()
		running := framework.WaitVMI(t, c, ns, vm.Name, 3*time.Minute, "running", framework.AgentConnected)
		d := running.Spec.Domain
		if d.CPU == nil || d.CPU.Sockets != want || d.Memory == nil || !d.Memory.Guest.Equal(resource.MustParse("384Mi")) {
			t.Fatalf("VMI cpu %+v memory %+v, want %d socket(s) and 384Mi", d.CPU, d.Memory, want)
		}
		if bus := d.Devices.Disks[0].Disk.Bus; bus != v1.DiskBusVirtio {
			t.Errorf("disk bus %q, want the preference's virtio", bus)
		}
		if got := f.LauncherPod(t, running).Spec.Containers[0].Resources.Requests.Memory(); got.Cmp(resource.MustParse("384Mi")) <= 0 {
			t.Errorf("launcher Pod requests %s, want more than the instancetype's 384Mi", got)
		}
	}
	sized(1)
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	ref := vm.Status.InstancetypeRef
	if ref == nil || ref.ControllerRevisionRef == nil || vm.Status.PreferenceRef == nil {
		t.Fatalf("status refs %+v %+v", ref, vm.Status.PreferenceRef)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.ControllerRevisionRef.Name}, &appsv1.ControllerRevision{}); err != nil {
		t.Fatalf("the captured revision: %v", err)
	}

	// The instancetype grows; after a restart the VM keeps its capture.
	if err := c.Get(ctx, client.ObjectKeyFromObject(it), it); err != nil {
		t.Fatal(err)
	}
	it.Spec.CPU.Guest = 2
	if err := c.Update(ctx, it); err != nil {
		t.Fatal(err)
	}
	old := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), old); err != nil {
		t.Fatal(err)
	}
	tekvirt(t, f, "restart", vm.Name, "-n", ns)
	framework.Eventually(t, 2*time.Minute, "a new VMI after the restart", func() error {
		vmi := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
			return err
		}
		if vmi.UID == old.UID {
			return fmt.Errorf("still the old VMI")
		}
		return nil
	})
	sized(1)
	for _, cond := range vm.Status.Conditions {
		if cond.Type == v1.VirtualMachineFailure && cond.Status == corev1.ConditionTrue {
			t.Errorf("VM failure: %s", cond.Message)
		}
	}
}
