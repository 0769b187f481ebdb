package cleanupvm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/tasks/guestrun"
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
	if err := Run(ctx, c, Params{VMName: "vm1", VMNamespace: "ns", Stop: true, Timeout: time.Minute}, &out, &out); err != nil {
		t.Fatal(err)
	}
	got := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "vm1"}, got); err != nil || *got.Spec.RunStrategy != v1.RunStrategyHalted {
		t.Fatalf("after stop: %v %v", got.Spec.RunStrategy, err)
	}
	if err := Run(ctx, c, Params{VMName: "vm1", VMNamespace: "ns", Delete: true, Timeout: time.Minute}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, c, Params{VMName: "vm1", VMNamespace: "ns", Stop: true, Delete: true, Timeout: time.Minute}, &out, &out); err != nil {
		t.Fatalf("cleaning a VM that is gone: %v", err)
	}
	if !strings.Contains(out.String(), "nothing to clean up") {
		t.Errorf("output:\n%s", out.String())
	}
	// A VMI that never goes away makes the stop time out with the VM named.
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stuck"}}
	vm2 := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "stuck"}, Spec: v1.VirtualMachineSpec{RunStrategy: &always}}
	c = fake.NewClientBuilder().WithScheme(s).WithObjects(vm2, vmi).Build()
	err = Run(ctx, c, Params{VMName: "stuck", VMNamespace: "ns", Stop: true, Timeout: time.Second}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "ns/stuck did not stop within 1s") {
		t.Fatalf("stuck VMI: err = %v", err)
	}
}

type exitingExec struct{ code int }

func (e exitingExec) Exec(context.Context, string, *v1.VirtualMachineInstance, guestexec.Request) (*guestexec.Result, error) {
	return &guestexec.Result{ExitCode: e.code, Stdout: []byte("guest output\n")}, nil
}

// TestGuestCommandFirst: a failing command leaves the VM as it is; a
// succeeding one is followed by the stop.
func TestGuestCommandFirst(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	always := v1.RunStrategyAlways
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1"}, Spec: v1.VirtualMachineSpec{RunStrategy: &always}}
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", Annotations: map[string]string{guestrun.AddressAnnotation: "192.0.2.1:8186"}},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: []v1.VirtualMachineInstanceCondition{
			{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vm, vmi).Build()
	ctx := context.Background()
	var out bytes.Buffer
	p := Params{VMName: "vm1", VMNamespace: "ns", Stop: true, Timeout: 5 * time.Second, Guest: guestrun.Params{Script: "sync"}, Executor: exitingExec{code: 2}}
	err = Run(ctx, c, p, &out, &out)
	var exit *guestrun.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(err.Error(), "neither stopped nor deleted") {
		t.Fatalf("failing command: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || *vm.Spec.RunStrategy != v1.RunStrategyAlways {
		t.Fatalf("the VM was touched after the command failed: %v %v", err, vm.Spec.RunStrategy)
	}
	p.Executor = exitingExec{}
	go func() { // the VM controller's part: the VMI goes once the VM is Halted
		for range 200 {
			time.Sleep(10 * time.Millisecond)
			cur := &v1.VirtualMachine{}
			if c.Get(ctx, client.ObjectKeyFromObject(vm), cur) == nil && *cur.Spec.RunStrategy == v1.RunStrategyHalted {
				_ = c.Delete(ctx, vmi)
				return
			}
		}
	}()
	if err := Run(ctx, c, p, &out, &out); err != nil || !strings.Contains(out.String(), "guest output") || !strings.Contains(out.String(), "VirtualMachine ns/vm1 stopped") {
		t.Fatalf("succeeding command: %v\n%s", err, out.String())
	}
}
