package macpool

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
)

func vmWith(ns, name string, macs ...string) *v1.VirtualMachine {
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{}}}
	for i, m := range macs {
		vm.Spec.Template.Spec.Domain.Devices.Interfaces = append(vm.Spec.Template.Spec.Domain.Devices.Interfaces, v1.Interface{Name: string(rune('a' + i)), MacAddress: m})
	}
	return vm
}

func newReader(t *testing.T, pool *nacv1.KubeMacPool, objs ...client.Object) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := nacv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if pool != nil {
		objs = append(objs, &nacv1.NetworkAddonsConfig{ObjectMeta: metav1.ObjectMeta{Name: nacv1.Name}, Spec: nacv1.NetworkAddonsConfigSpec{KubeMacPool: pool}})
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestPoolGivesDistinctMACsAndFreesThem(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	rng := &nacv1.KubeMacPool{RangeStart: "02:aa:bb:00:00:00", RangeEnd: "02:aa:bb:00:00:ff"}
	existing := vmWith("ns", "old", "02:aa:bb:00:00:00")
	p := &Pool{Reader: newReader(t, rng, existing), Now: func() time.Time { return now }}

	// Two creates before the cache shows either: distinct MACs.
	a, b := vmWith("ns", "a", ""), vmWith("other", "b", "")
	for _, vm := range []*v1.VirtualMachine{a, b} {
		if err := p.Assign(ctx, vm, &vm.Spec.Template.Spec); err != nil {
			t.Fatal(err)
		}
	}
	ma, mb := a.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress, b.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress
	if ma != "02:aa:bb:00:00:01" || mb != "02:aa:bb:00:00:02" {
		t.Fatalf("MACs %s and %s, want the two after the one in use", ma, mb)
	}
	// A VM asking for another namespace's MAC: refused, the owner unnamed.
	c := vmWith("ns", "c", "02:aa:bb:00:00:02")
	err := p.Assign(ctx, c, &c.Spec.Template.Spec)
	if err == nil || !strings.Contains(err.Error(), "already used by another VirtualMachine") {
		t.Fatalf("a duplicate MAC: %v", err)
	}
	// Its own namespace's VM a, not yet in the cache: named.
	e := vmWith("ns", "e", "02:aa:bb:00:00:01")
	if err := p.Assign(ctx, e, &e.Spec.Template.Spec); err == nil || !strings.Contains(err.Error(), "already used by VirtualMachine ns/a") {
		t.Fatalf("a's MAC before the cache holds a: %v, want refused naming ns/a", err)
	}
	// The same VM admitted again (an update) keeps its MAC.
	if err := p.Assign(ctx, a, &a.Spec.Template.Spec); err != nil {
		t.Fatalf("updating a: %v", err)
	}
	// Once the reservations lapse, with "old" deleted and a and b never
	// stored, the range's first MAC is given again.
	now = now.Add(2 * reservationTTL)
	p.Reader = newReader(t, rng)
	d := vmWith("ns", "d", "")
	if err := p.Assign(ctx, d, &d.Spec.Template.Spec); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress; got != "02:aa:bb:00:00:00" {
		t.Errorf("after deletions: %s, want the freed 02:aa:bb:00:00:00", got)
	}
}

func TestPoolOffWithoutKubeMacPool(t *testing.T) {
	for name, r := range map[string]client.Reader{
		"no NetworkAddonsConfig": newReader(t, nil),
		"no range":               newReader(t, &nacv1.KubeMacPool{}),
	} {
		vm := vmWith("ns", "a", "")
		if err := (&Pool{Reader: r}).Assign(context.Background(), vm, &vm.Spec.Template.Spec); err != nil || vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress != "" {
			t.Errorf("%s: %v, MAC %q: want nothing given", name, err, vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress)
		}
	}
}

// A VM created with generateName is admitted without its name (the API
// server names it after admission): its first update, under its name,
// keeps the MAC it was given, while a new VM cannot take it.
func TestPoolKeepsAGeneratedNamesMAC(t *testing.T) {
	ctx := context.Background()
	rng := &nacv1.KubeMacPool{RangeStart: "02:aa:bb:00:00:00", RangeEnd: "02:aa:bb:00:00:ff"}
	p := &Pool{Reader: newReader(t, rng)}
	created := vmWith("ns", "", "")
	if err := p.Assign(ctx, created, &created.Spec.Template.Spec); err != nil {
		t.Fatal(err)
	}
	mac := created.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress
	named := vmWith("ns", "vm-test-x7k2q", mac)
	if err := p.Assign(ctx, named, &named.Spec.Template.Spec, mac); err != nil {
		t.Errorf("the first update of the generated VM: %v", err)
	}
	other := vmWith("ns", "other", mac)
	if err := p.Assign(ctx, other, &other.Spec.Template.Spec); err == nil {
		t.Errorf("another VM took %s", mac)
	}
}
