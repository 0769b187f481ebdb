package createvm

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/vmcreate"
)

const manifest = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm1
spec:
  running: false
  template:
    spec:
      domain:
        devices: {}
`

func TestDecodeRejects(t *testing.T) {
	for name, tc := range map[string]struct{ manifest, want string }{
		"empty":         {"", "manifest is empty"},
		"unknown field": {strings.Replace(manifest, "running: false", "running: false\n  flavor: small", 1), `unknown field "spec.flavor"`},
		"wrong kind":    {strings.Replace(manifest, "kind: VirtualMachine", "kind: Pod", 1), "want kind VirtualMachine"},
		"no name":       {strings.Replace(manifest, "name: vm1", "labels: {}", 1), "neither metadata.name"},
	} {
		if _, err := Decode(tc.manifest); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func TestRunIsIdempotent(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	ctx := context.Background()
	started := 0
	start := func(context.Context, string, string) error { started++; return nil }
	p := Params{Manifest: manifest, Options: vmcreate.Options{Namespace: "ns1", StartVM: "false", SetOwnerReference: "false"}}
	res, err := Run(ctx, c, start, p)
	if err != nil || res.Name != "vm1" || res.Namespace != "ns1" || res.Existed {
		t.Fatalf("first run = %+v, %v", res, err)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns1", Name: "vm1"}, vm); err != nil {
		t.Fatal(err)
	}
	if vm.Spec.Running == nil || *vm.Spec.Running || vm.Spec.RunStrategy != nil || started != 0 {
		t.Errorf("startVM false changed the manifest's running: false (running %v, runStrategy %v, started %d)", vm.Spec.Running, vm.Spec.RunStrategy, started)
	}
	res, err = Run(ctx, c, start, p)
	if err != nil || !res.Existed {
		t.Fatalf("rerun = %+v, %v; want the earlier VM found", res, err)
	}
	p.StartVM = "true"
	if _, err := Run(ctx, c, start, p); err == nil || !strings.Contains(err.Error(), "was not created by this step") {
		t.Fatalf("different params on an existing VM: err = %v", err)
	}
}

func TestRunFromVirtctl(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	ctx := context.Background()
	start := func(context.Context, string, string) error { return nil }
	opts := vmcreate.Options{Namespace: "ns1", SetOwnerReference: "false"}
	res, err := Run(ctx, c, start, Params{Virtctl: "create vm --name v1 --instancetype u1.nano --volume-containerdisk src:img", Options: opts})
	if err != nil || res.Name != "v1" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns1", Name: "v1"}, vm); err != nil || vm.Spec.Instancetype.Name != "u1.nano" {
		t.Fatalf("VM %+v, %v", vm.Spec.Instancetype, err)
	}
	for name, p := range map[string]Params{
		"both":    {Manifest: manifest, Virtctl: "--name x", Options: opts},
		"neither": {Options: opts},
		"bad":     {Virtctl: "--colour x", Options: opts},
	} {
		if _, err := Run(ctx, c, start, p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
