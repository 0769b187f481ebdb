package createvm

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/kube"
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

func TestPrepare(t *testing.T) {
	for name, tc := range map[string]struct {
		p       Params
		wantRS  v1.VirtualMachineRunStrategy
		wantNS  string
		wantErr string
	}{
		"startVM true maps running":  {p: Params{StartVM: "true", DefaultNamespace: "d"}, wantRS: v1.RunStrategyAlways, wantNS: "d"},
		"startVM false":              {p: Params{StartVM: "false", Namespace: "n"}, wantRS: v1.RunStrategyHalted, wantNS: "n"},
		"runStrategy wins":           {p: Params{RunStrategy: "Manual", StartVM: "true", Namespace: "n"}, wantRS: v1.RunStrategyManual, wantNS: "n"},
		"bad runStrategy":            {p: Params{RunStrategy: "Sometimes", Namespace: "n"}, wantErr: `runStrategy "Sometimes"`},
		"bad startVM":                {p: Params{StartVM: "yes please", Namespace: "n"}, wantErr: `startVM "yes please"`},
		"no namespace":               {p: Params{}, wantErr: "no namespace"},
		"owner without pod identity": {p: Params{Namespace: "n", SetOwnerReference: "true"}, wantErr: "POD_NAME"},
	} {
		vm, err := Decode(manifest)
		if err != nil {
			t.Fatal(err)
		}
		err = Prepare(vm, tc.p)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if vm.Spec.Running != nil || vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != tc.wantRS || vm.Namespace != tc.wantNS {
			t.Errorf("%s: running=%v runStrategy=%v ns=%q, want %s in %q", name, vm.Spec.Running, vm.Spec.RunStrategy, vm.Namespace, tc.wantRS, tc.wantNS)
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
	p := Params{Manifest: manifest, Namespace: "ns1", StartVM: "true", SetOwnerReference: "true", OwnerName: "pod-1", OwnerUID: "uid-1"}
	res, err := Run(ctx, c, p)
	if err != nil || res.Name != "vm1" || res.Namespace != "ns1" || res.Existed {
		t.Fatalf("first run = %+v, %v", res, err)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns1", Name: "vm1"}, vm); err != nil {
		t.Fatal(err)
	}
	if len(vm.OwnerReferences) != 1 || vm.OwnerReferences[0].Kind != "Pod" || vm.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("owner references = %+v", vm.OwnerReferences)
	}
	res, err = Run(ctx, c, p)
	if err != nil || !res.Existed {
		t.Fatalf("rerun = %+v, %v; want the earlier VM found", res, err)
	}
	p.StartVM = "false"
	if _, err := Run(ctx, c, p); err == nil || !strings.Contains(err.Error(), "was not created from this manifest") {
		t.Fatalf("different params on an existing VM: err = %v", err)
	}
}
