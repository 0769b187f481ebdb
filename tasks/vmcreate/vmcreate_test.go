package vmcreate

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

func vm(rs *v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
	return &v1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "vm1"},
		Spec:       v1.VirtualMachineSpec{RunStrategy: rs},
	}
}

func strategy(rs v1.VirtualMachineRunStrategy) *v1.VirtualMachineRunStrategy { return &rs }

func TestApply(t *testing.T) {
	for name, tc := range map[string]struct {
		o       Options
		wantRS  *v1.VirtualMachineRunStrategy
		wantNS  string
		wantErr string
	}{
		"TaskRun's namespace":         {o: Options{DefaultNamespace: "d"}, wantNS: "d"},
		"param namespace":             {o: Options{Namespace: "n", DefaultNamespace: "d"}, wantNS: "n"},
		"runStrategy set":             {o: Options{RunStrategy: "Manual", StartVM: "true", Namespace: "n"}, wantRS: strategy(v1.RunStrategyManual), wantNS: "n"},
		"startVM leaves the strategy": {o: Options{StartVM: "true", Namespace: "n"}, wantNS: "n"},
		"bad runStrategy":             {o: Options{RunStrategy: "Sometimes", Namespace: "n"}, wantErr: `runStrategy "Sometimes"`},
		"bad startVM":                 {o: Options{StartVM: "yes please", Namespace: "n"}, wantErr: `startVM "yes please"`},
		"bad setOwnerReference":       {o: Options{Namespace: "n", SetOwnerReference: "maybe"}, wantErr: `setOwnerReference "maybe"`},
		"no namespace":                {o: Options{}, wantErr: "no namespace"},
		"owner without pod identity":  {o: Options{Namespace: "n", SetOwnerReference: "true"}, wantErr: "POD_NAME"},
	} {
		if tc.o.SetOwnerReference == "" {
			tc.o.SetOwnerReference = "false"
		}
		got := vm(nil)
		err := tc.o.Apply(got)
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
		if got.Namespace != tc.wantNS || (tc.wantRS == nil) != (got.Spec.RunStrategy == nil) || (tc.wantRS != nil && *got.Spec.RunStrategy != *tc.wantRS) {
			t.Errorf("%s: runStrategy=%v ns=%q, want %v in %q", name, got.Spec.RunStrategy, got.Namespace, tc.wantRS, tc.wantNS)
		}
	}
}

func TestShouldStart(t *testing.T) {
	yes := true
	running := vm(nil)
	running.Spec.Running = &yes
	for name, tc := range map[string]struct {
		startVM string
		vm      *v1.VirtualMachine
		want    bool
	}{
		"true on a halted VM":   {"true", vm(strategy(v1.RunStrategyHalted)), true},
		"true on a Manual VM":   {"true", vm(strategy(v1.RunStrategyManual)), true},
		"true, no strategy":     {"true", vm(nil), true},
		"true on an Always VM":  {"true", vm(strategy(v1.RunStrategyAlways)), false},
		"true on running: true": {"true", running, false},
		"false leaves it":       {"false", vm(strategy(v1.RunStrategyHalted)), false},
		"unset leaves it":       {"", vm(strategy(v1.RunStrategyHalted)), false},
		"false on an Always VM": {"false", vm(strategy(v1.RunStrategyAlways)), false},
	} {
		if got := (Options{StartVM: tc.startVM}).ShouldStart(tc.vm); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestCreateIsIdempotentAndStarts(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	ctx := context.Background()
	var starts []string
	start := func(_ context.Context, ns, name string) error {
		starts = append(starts, ns+"/"+name)
		return nil
	}
	o := Options{Namespace: "ns1", StartVM: "true", SetOwnerReference: "true", Owner: metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "pod-1", UID: "uid-1"}}
	first := vm(strategy(v1.RunStrategyHalted))
	if err := o.Apply(first); err != nil {
		t.Fatal(err)
	}
	res, err := Create(ctx, c, start, o, first, Identity("a", "b"))
	if err != nil || res.Name != "vm1" || res.Namespace != "ns1" || res.Existed || !res.Started {
		t.Fatalf("first run = %+v, %v", res, err)
	}
	got := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns1", Name: "vm1"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Kind != "Pod" || got.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("owner references = %+v", got.OwnerReferences)
	}
	again := vm(strategy(v1.RunStrategyHalted))
	_ = o.Apply(again)
	res, err = Create(ctx, c, start, o, again, Identity("a", "b"))
	if err != nil || !res.Existed {
		t.Fatalf("rerun = %+v, %v; want the earlier VM found", res, err)
	}
	if len(starts) != 2 || starts[0] != "ns1/vm1" {
		t.Errorf("starts = %v, want the VM started by each run (the start subresource is idempotent)", starts)
	}
	other := vm(strategy(v1.RunStrategyHalted))
	_ = o.Apply(other)
	if _, err := Create(ctx, c, start, o, other, Identity("a", "c")); err == nil || !strings.Contains(err.Error(), "was not created by this step") {
		t.Fatalf("other params on an existing VM: err = %v", err)
	}
	failing := func(context.Context, string, string) error { return errors.New("forbidden") }
	fresh := vm(strategy(v1.RunStrategyHalted))
	fresh.Name = "vm2"
	_ = o.Apply(fresh)
	if _, err := Create(ctx, c, failing, o, fresh, Identity("x")); err == nil || !strings.Contains(err.Error(), "starting VirtualMachine ns1/vm2: forbidden") {
		t.Errorf("failed start: err = %v", err)
	}
}
