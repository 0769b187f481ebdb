package eviction

import (
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestEffective(t *testing.T) {
	external, none := v1.EvictionStrategyExternal, v1.EvictionStrategyNone
	own := func(s *v1.EvictionStrategy) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{EvictionStrategy: s}}
	}
	for _, tc := range []struct {
		name    string
		vmi     *v1.VirtualMachineInstance
		cluster *v1.EvictionStrategy
		want    v1.EvictionStrategy
	}{
		{"nothing set", own(nil), nil, v1.EvictionStrategyNone},
		{"the cluster's", own(nil), &external, v1.EvictionStrategyExternal},
		{"the VMI's over the cluster's", own(&none), &external, v1.EvictionStrategyNone},
	} {
		if got := Effective(tc.vmi, tc.cluster); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestDecide is KubeVirt's eviction table, for VMIs that can and cannot
// live-migrate.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		strategy           v1.EvictionStrategy
		marked, migratable bool
		want               Decision
		says               string
		budget             bool
	}{
		{v1.EvictionStrategyNone, false, true, Decision{Allow: true}, "", false},
		{v1.EvictionStrategyLiveMigrateIfPossible, false, false, Decision{Allow: true}, "", false},
		{v1.EvictionStrategyLiveMigrateIfPossible, false, true, Decision{Evacuate: true}, `Eviction triggered evacuation of VMI "ns/vm"`, true},
		{v1.EvictionStrategyLiveMigrate, false, false, Decision{}, "not live-migratable", true},
		{v1.EvictionStrategyLiveMigrate, false, true, Decision{Evacuate: true}, `Eviction triggered evacuation of VMI "ns/vm"`, true},
		{v1.EvictionStrategyLiveMigrate, true, true, Decision{}, "Evacuation in progress", true},
		{v1.EvictionStrategyExternal, false, false, Decision{Evacuate: true}, `Eviction triggered evacuation of VMI "ns/vm"`, true},
		{v1.EvictionStrategyExternal, true, true, Decision{}, "Evacuation in progress", true},
	} {
		got := Decide(tc.strategy, "ns", "vm", tc.marked, tc.migratable)
		if got.Allow != tc.want.Allow || got.Evacuate != tc.want.Evacuate || !strings.Contains(got.Message, tc.says) {
			t.Errorf("%s (marked %v, migratable %v): %+v, want %+v saying %q", tc.strategy, tc.marked, tc.migratable, got, tc.want, tc.says)
		}
		if NeedsBudget(tc.strategy, tc.migratable) != tc.budget {
			t.Errorf("%s (migratable %v): NeedsBudget %v, want %v", tc.strategy, tc.migratable, !tc.budget, tc.budget)
		}
	}
}
