package nodepool

import (
	"slices"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/utils/ptr"
)

func TestDesired(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     hyperv1.NodePoolSpec
		current  int
		expected int
	}{
		{"replicas", hyperv1.NodePoolSpec{Replicas: ptr.To(int32(3))}, 1, 3},
		{"replicas zero", hyperv1.NodePoolSpec{Replicas: ptr.To(int32(0))}, 2, 0},
		{"neither", hyperv1.NodePoolSpec{}, 2, 0},
		{"autoscaling below min", hyperv1.NodePoolSpec{AutoScaling: &hyperv1.NodePoolAutoScaling{Min: 2, Max: 5}}, 0, 2},
		{"autoscaling within", hyperv1.NodePoolSpec{AutoScaling: &hyperv1.NodePoolAutoScaling{Min: 2, Max: 5}}, 4, 4},
		{"autoscaling above max", hyperv1.NodePoolSpec{AutoScaling: &hyperv1.NodePoolAutoScaling{Min: 2, Max: 5}}, 7, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Desired(&hyperv1.NodePool{Spec: tc.spec}, tc.current); got != tc.expected {
				t.Errorf("Desired = %d, want %d", got, tc.expected)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ready := func(name string, age int) Machine {
		return Machine{Name: name, Created: t0.Add(-time.Duration(age) * time.Minute), VMReady: true, NodeReady: true}
	}
	for _, tc := range []struct {
		name       string
		desired    int
		machines   []Machine
		wantAdd    int
		wantRemove []string
	}{
		{"empty pool grows", 2, nil, 2, nil},
		{"steady", 2, []Machine{ready("a", 5), ready("b", 4)}, 0, nil},
		{"one more", 3, []Machine{ready("a", 5), ready("b", 4)}, 1, nil},
		{"newest goes first", 1, []Machine{ready("old", 9), ready("new", 1)}, 0, []string{"new"}},
		{"no node goes before the newest", 1, []Machine{{Name: "joining", Created: t0.Add(-20 * time.Minute), VMReady: true}, ready("new", 1)}, 0, []string{"joining"}},
		{"no VM before a VM without node", 1, []Machine{{Name: "booting", Created: t0}, {Name: "joining", Created: t0, VMReady: true}}, 0, []string{"booting"}},
		{"removing ones do not count", 2, []Machine{ready("a", 5), {Name: "b", Removing: true}}, 1, nil},
		{"removing ones are not chosen again", 1, []Machine{ready("a", 5), ready("c", 1), {Name: "b", Removing: true}}, 0, []string{"c"}},
		{"to zero", 0, []Machine{ready("a", 5), ready("b", 1)}, 0, []string{"b", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add, remove := Plan(tc.desired, tc.machines)
			if add != tc.wantAdd || !slices.Equal(remove, tc.wantRemove) {
				t.Errorf("Plan = add %d remove %v, want add %d remove %v", add, remove, tc.wantAdd, tc.wantRemove)
			}
		})
	}
}

func TestEvacuating(t *testing.T) {
	got := Evacuating([]Machine{{Name: "a", Evacuate: true}, {Name: "b"}, {Name: "c", Evacuate: true, Removing: true}})
	if !slices.Equal(got, []string{"a"}) {
		t.Errorf("Evacuating = %v, want [a]: evacuated and not yet removing", got)
	}
}
