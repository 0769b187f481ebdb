package metrics

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func TestPhaseTransitions(t *testing.T) {
	created := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	m := func(secs ...float64) v1.VirtualMachineInstanceMigration {
		phases := []v1.VirtualMachineInstanceMigrationPhase{v1.MigrationPending, v1.MigrationSucceeded}
		out := v1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		for i, s := range secs {
			out.Status.PhaseTransitionTimestamps = append(out.Status.PhaseTransitionTimestamps, v1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{
				Phase: phases[i], PhaseTransitionTimestamp: metav1.NewTime(created.Add(time.Duration(s * float64(time.Second))))})
		}
		return out
	}
	got := PhaseTransitions([]v1.VirtualMachineInstanceMigration{m(0.25, 7), m(0.5, 45), m(1)})
	pending, succeeded := got[string(v1.MigrationPending)], got[string(v1.MigrationSucceeded)]
	if len(got) != 2 || pending.Count != 3 || pending.Sum != 1.75 || pending.Buckets[0.5] != 2 || pending.Buckets[1] != 3 || pending.Buckets[3600] != 3 {
		t.Errorf("Pending: %+v", pending)
	}
	if succeeded.Count != 2 || succeeded.Sum != 52 || succeeded.Buckets[5] != 0 || succeeded.Buckets[10] != 1 || succeeded.Buckets[30] != 1 || succeeded.Buckets[60] != 2 {
		t.Errorf("Succeeded: %+v", succeeded)
	}
	if got := PhaseTransitions(nil); len(got) != 0 {
		t.Errorf("no migrations: %v", got)
	}
}
