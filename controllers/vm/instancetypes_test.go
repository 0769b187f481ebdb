package vm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/instancetype"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestInstancetypeExpandedAndCaptured: a VM naming a cluster instancetype
// and a preference starts with their sizing and topology, captured in
// ControllerRevisions noted in its status; a later edit of the
// instancetype does not change the VM's next VMI. A VM naming a
// preference that does not exist fails naming it, without a VMI.
func TestInstancetypeExpandedAndCaptured(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	it := &instancetypev1beta1.VirtualMachineClusterInstancetype{ObjectMeta: metav1.ObjectMeta{Name: "u1.small"},
		Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{CPU: instancetypev1beta1.CPUInstancetype{Guest: 2},
			Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("2Gi")}}}
	pref := &instancetypev1beta1.VirtualMachinePreference{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cores"},
		Spec: instancetypev1beta1.VirtualMachinePreferenceSpec{CPU: &instancetypev1beta1.CPUPreferences{PreferredCPUTopology: ptrTo(instancetypev1beta1.Cores)}}}
	for _, o := range []client.Object{it, pref} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	vm := newVM("sized", v1.RunStrategyAlways)
	vm.Spec.Template.Spec.Domain.Resources = v1.ResourceRequirements{}
	vm.Spec.Instancetype = &v1.InstancetypeMatcher{Name: "u1.small"}
	vm.Spec.Preference = &v1.PreferenceMatcher{Name: "cores", Kind: instancetype.PreferenceKind}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(vm)
	var revision string
	testenv.Eventually(t, "VMI sized by the instancetype, revisions in status", func() error {
		got, vmi, err := vmState(c, key)
		if err != nil || vmi == nil {
			return fmt.Errorf("no VMI yet: %w", err)
		}
		d := vmi.Spec.Domain
		if d.CPU == nil || d.CPU.Cores != 2 || d.CPU.Sockets != 1 || d.Memory == nil || !d.Memory.Guest.Equal(resource.MustParse("2Gi")) {
			return fmt.Errorf("VMI cpu %+v memory %+v", d.CPU, d.Memory)
		}
		ref := got.Status.InstancetypeRef
		if ref == nil || ref.Kind != instancetype.ClusterInstancetypeKind || ref.ControllerRevisionRef == nil || got.Status.PreferenceRef == nil {
			return fmt.Errorf("status refs %+v %+v", ref, got.Status.PreferenceRef)
		}
		revision = ref.ControllerRevisionRef.Name
		return nil
	})
	cr := &appsv1.ControllerRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: revision}, cr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(revision, "sized-u1.small-") || !metav1.IsControlledBy(cr, getVM(t, c, key)) {
		t.Errorf("revision %s owned by %v", revision, cr.OwnerReferences)
	}

	// The instancetype grows; the VM's next VMI keeps what it captured.
	if err := c.Get(ctx, client.ObjectKeyFromObject(it), it); err != nil {
		t.Fatal(err)
	}
	it.Spec.CPU.Guest = 8
	if err := c.Update(ctx, it); err != nil {
		t.Fatal(err)
	}
	_, first, _ := vmState(c, key)
	setPhase(t, c, key, v1.Failed, false)
	testenv.Eventually(t, "VMI replaced with the captured sizing", func() error {
		_, vmi, err := vmState(c, key)
		if err != nil || vmi == nil || vmi.UID == first.UID {
			return fmt.Errorf("not replaced yet: %w", err)
		}
		if vmi.Spec.Domain.CPU.Cores != 2 {
			return fmt.Errorf("cores %d, want the captured 2", vmi.Spec.Domain.CPU.Cores)
		}
		return nil
	})

	missing := newVM("no-pref", v1.RunStrategyAlways)
	missing.Spec.Preference = &v1.PreferenceMatcher{Name: "nope"}
	if err := c.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Failure naming the missing preference", func() error {
		got, vmi, err := vmState(c, client.ObjectKeyFromObject(missing))
		if err != nil {
			return err
		}
		if vmi != nil {
			t.Fatal("a VMI was created for a VM whose preference does not exist")
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.VirtualMachineFailure && cond.Status == corev1.ConditionTrue && strings.Contains(cond.Message, "VirtualMachineClusterPreference nope not found") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
}

func ptrTo[T any](v T) *T { return &v }

func getVM(t *testing.T, c client.Client, key client.ObjectKey) *v1.VirtualMachine {
	t.Helper()
	vm := &v1.VirtualMachine{}
	if err := c.Get(context.Background(), key, vm); err != nil {
		t.Fatal(err)
	}
	return vm
}
