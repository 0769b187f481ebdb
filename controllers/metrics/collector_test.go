package metrics

import (
	"reflect"
	"testing"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func vmi(node string, phase v1.VirtualMachineInstancePhase) v1.VirtualMachineInstance {
	return v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{NodeName: node, Phase: phase}}
}

func TestPhaseCounts(t *testing.T) {
	got := PhaseCounts([]v1.VirtualMachineInstance{
		vmi("b", v1.Running), vmi("a", v1.Running), vmi("a", v1.Running), vmi("", v1.Scheduling), vmi("", ""), vmi("a", v1.Failed),
	})
	want := []PhaseCount{{"", "pending", 1}, {"", "scheduling", 1}, {"a", "failed", 1}, {"a", "running", 2}, {"b", "running", 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PhaseCounts = %+v, want %+v", got, want)
	}
	if got := PhaseCounts(nil); len(got) != 0 {
		t.Errorf("no VMIs: %+v", got)
	}
}

func TestPercent(t *testing.T) {
	for in, want := range map[cdiv1.DataVolumeProgress]float64{"45.2%": 45.2, "100.0%": 100, "0%": 0} {
		if got, ok := Percent(in); !ok || got != want {
			t.Errorf("Percent(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []cdiv1.DataVolumeProgress{"", "N/A", "x%", "120%", "-1%"} {
		if _, ok := Percent(in); ok {
			t.Errorf("Percent(%q) accepted", in)
		}
	}
}

func TestMigrationCounts(t *testing.T) {
	m := func(p v1.VirtualMachineInstanceMigrationPhase) v1.VirtualMachineInstanceMigration {
		return v1.VirtualMachineInstanceMigration{Status: v1.VirtualMachineInstanceMigrationStatus{Phase: p}}
	}
	got := MigrationCounts([]v1.VirtualMachineInstanceMigration{
		m(""), m(v1.MigrationPending), m(v1.MigrationScheduling), m(v1.MigrationPreparingTarget), m(v1.MigrationTargetReady),
		m(v1.MigrationRunning), m(v1.MigrationRunning), m(v1.MigrationSucceeded), m(v1.MigrationFailed),
	})
	want := map[string]int{"unset": 1, "pending": 1, "scheduling": 3, "running": 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MigrationCounts = %v, want %v", got, want)
	}
}
