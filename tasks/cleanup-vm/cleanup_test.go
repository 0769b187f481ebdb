package cleanupvm

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

func TestRun(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	always := v1.RunStrategyAlways
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1"}, Spec: v1.VirtualMachineSpec{RunStrategy: &always}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vm).Build()
	ctx := context.Background()
	var out bytes.Buffer
	if err := Run(ctx, c, Params{VMName: "vm1", VMNamespace: "ns", Stop: true, Timeout: time.Minute}, &out); err != nil {
		t.Fatal(err)
	}
	got := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "vm1"}, got); err != nil || *got.Spec.RunStrategy != v1.RunStrategyHalted {
		t.Fatalf("after stop: %v %v", got.Spec.RunStrategy, err)
	}
	if err := Run(ctx, c, Params{VMName: "vm1", VMNamespace: "ns", Delete: true, Timeout: time.Minute}, &out); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, c, Params{VMName: "vm1", VMNamespace: "ns", Stop: true, Delete: true, Timeout: time.Minute}, &out); err != nil {
		t.Fatalf("cleaning a VM that is gone: %v", err)
	}
	if !strings.Contains(out.String(), "nothing to clean up") {
		t.Errorf("output:\n%s", out.String())
	}
	// A VMI that never goes away makes the stop time out with the VM named.
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stuck"}}
	vm2 := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stuck"}, Spec: v1.VirtualMachineSpec{RunStrategy: &always}}
	c = fake.NewClientBuilder().WithScheme(s).WithObjects(vm2, vmi).Build()
	err = Run(ctx, c, Params{VMName: "stuck", VMNamespace: "ns", Stop: true, Timeout: time.Second}, &out)
	if err == nil || !strings.Contains(err.Error(), "ns/stuck did not stop within 1s") {
		t.Fatalf("stuck VMI: err = %v", err)
	}
}
