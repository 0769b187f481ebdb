package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	"github.com/tekvirt/tekvirt/controllers/macpool"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestMACPool: with the NetworkAddonsConfig the HyperConverged made (the
// MAC pool on, a range of its own, listed in relatedObjects), every VM
// interface without a MAC gets a distinct one of the range at admission,
// kept in the VM; a VM naming another's MAC is refused (the owner named
// only in its own namespace); deleting a VM frees its MAC.
func TestMACPool(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	ns, other := f.Namespace(t), f.Namespace(t)

	nac := &nacv1.NetworkAddonsConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: nacv1.Name}, nac); err != nil {
		t.Fatalf("the HyperConverged's NetworkAddonsConfig: %v", err)
	}
	if mp := nac.Spec.KubeMacPool; mp == nil || mp.RangeStart == "" {
		t.Fatalf("kubeMacPool %+v: want a range", nac.Spec.KubeMacPool)
	}
	r, err := macpool.ParseRange(nac.Spec.KubeMacPool.RangeStart, nac.Spec.KubeMacPool.RangeEnd)
	if err != nil {
		t.Fatal(err)
	}
	hcos := &hcov1beta1.HyperConvergedList{}
	if err := c.List(ctx, hcos); err != nil || len(hcos.Items) != 1 {
		t.Fatalf("HyperConvergeds %v: %v", hcos.Items, err)
	}
	if !slices.ContainsFunc(hcos.Items[0].Status.RelatedObjects, func(o corev1.ObjectReference) bool { return o.Kind == "NetworkAddonsConfig" && o.Name == nacv1.Name }) {
		t.Errorf("the HyperConverged's relatedObjects do not name NetworkAddonsConfig %s", nacv1.Name)
	}

	macOf := func(vm *v1.VirtualMachine) string {
		ifs := vm.Spec.Template.Spec.Domain.Devices.Interfaces
		if len(ifs) != 1 {
			t.Fatalf("VM %s: interfaces %+v, want the default one", vm.Name, ifs)
		}
		return ifs[0].MacAddress
	}
	create := func(ns, name, mac string) (*v1.VirtualMachine, error) {
		vm := framework.GuestVM(ns, name, framework.GuestImage, v1.RunStrategyHalted)
		if mac != "" {
			vm.Spec.Template.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default", MacAddress: mac,
				InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}
			vm.Spec.Template.Spec.Networks = []v1.Network{*v1.DefaultPodNetwork()}
		}
		return vm, c.Create(ctx, vm)
	}
	a, err := create(ns, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := create(ns, "b", "")
	if err != nil {
		t.Fatal(err)
	}
	macA, macB := macOf(a), macOf(b)
	for _, m := range []string{macA, macB} {
		hw, err := net.ParseMAC(m)
		if err != nil || !r.Contains(uint64(hw[0])<<40|uint64(hw[1])<<32|uint64(hw[2])<<24|uint64(hw[3])<<16|uint64(hw[4])<<8|uint64(hw[5])) {
			t.Errorf("MAC %q is not in the pool's range %s-%s", m, nac.Spec.KubeMacPool.RangeStart, nac.Spec.KubeMacPool.RangeEnd)
		}
	}
	if macA == macB {
		t.Fatalf("two VMs got the same MAC %s", macA)
	}
	stored := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), stored); err != nil || macOf(stored) != macA {
		t.Errorf("VM a as stored: MAC %q, %v; want %s", macOf(stored), err, macA)
	}

	// Attacks: B's MAC again, in the same namespace and in another.
	if _, err := create(ns, "c", macB); err == nil || !strings.Contains(err.Error(), "already used by VirtualMachine "+ns+"/b") {
		t.Errorf("a VM naming b's MAC: %v, want refused naming b", err)
	}
	_, err = create(other, "c", macB)
	if err == nil || !strings.Contains(err.Error(), "already used by another VirtualMachine") || strings.Contains(err.Error(), ns) {
		t.Errorf("another namespace's VM naming b's MAC: %v, want refused without naming b's namespace", err)
	}

	// Deleting a frees its MAC.
	if err := c.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "a's MAC taken by another VM once a is gone", func() error {
		_, err := create(other, "d", macA)
		if err != nil {
			return fmt.Errorf("creating d with %s: %w", macA, err)
		}
		return nil
	})

	// The range set as install.md shows (HCO's JSON patch annotation).
	if out, err := runExample(t, f, docexample.Find(t, "install-macpool-range"), t.TempDir()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	framework.Eventually(t, time.Minute, "the annotated range in use", func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: nacv1.Name}, nac); err != nil {
			return err
		}
		if mp := nac.Spec.KubeMacPool; mp == nil || mp.RangeStart != "02:00:00:00:00:00" || mp.RangeEnd != "02:00:00:0f:ff:ff" {
			return fmt.Errorf("kubeMacPool %+v", mp)
		}
		vm, err := create(ns, fmt.Sprintf("e-%d", time.Now().UnixNano()%100000), "")
		if err != nil {
			return err
		}
		if m := macOf(vm); !strings.HasPrefix(m, "02:00:00:0") {
			return fmt.Errorf("a new VM got %s, not from 02:00:00:00:00:00-02:00:00:0f:ff:ff", m)
		}
		return nil
	})
}
