package handler

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// constCollector serves fixed metrics.
type constCollector []prometheus.Metric

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }
func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}

func TestVMIMetrics(t *testing.T) {
	st := &launcher.Stats{MemoryDomainBytes: 256 << 20, MemoryResidentBytes: 300 << 20, CPUSeconds: 12.5,
		VCPUs: []launcher.VCPUStats{{ID: 0, State: "running", Seconds: 10}, {ID: 1, State: "offline", Seconds: 0.25}}}
	want := `
# HELP kubevirt_vmi_cpu_usage_seconds_total Total CPU time spent in all modes (vCPUs and hypervisor).
# TYPE kubevirt_vmi_cpu_usage_seconds_total counter
kubevirt_vmi_cpu_usage_seconds_total{name="vm1",namespace="ns",node="n2"} 12.5
# HELP kubevirt_vmi_memory_domain_bytes The amount of memory in bytes allocated to the domain.
# TYPE kubevirt_vmi_memory_domain_bytes gauge
kubevirt_vmi_memory_domain_bytes{name="vm1",namespace="ns",node="n2"} 2.68435456e+08
# HELP kubevirt_vmi_memory_resident_bytes Resident set size of the process running the domain.
# TYPE kubevirt_vmi_memory_resident_bytes gauge
kubevirt_vmi_memory_resident_bytes{name="vm1",namespace="ns",node="n2"} 3.145728e+08
# HELP kubevirt_vmi_vcpu_seconds_total Total amount of time spent in each state by each vCPU.
# TYPE kubevirt_vmi_vcpu_seconds_total counter
kubevirt_vmi_vcpu_seconds_total{id="0",name="vm1",namespace="ns",node="n2",state="running"} 10
kubevirt_vmi_vcpu_seconds_total{id="1",name="vm1",namespace="ns",node="n2",state="offline"} 0.25
`
	if err := testutil.CollectAndCompare(constCollector(vmiMetrics("n2", "ns", "vm1", st)), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := len(vmiMetrics("n2", "ns", "vm1", &launcher.Stats{})); n != 3 {
		t.Errorf("a domain without vCPU stats: %d series, want 3", n)
	}
}

func TestMigrationMetrics(t *testing.T) {
	want := `
# HELP kubevirt_vmi_migration_data_processed_bytes The total Guest OS data processed and migrated to the new VM.
# TYPE kubevirt_vmi_migration_data_processed_bytes gauge
kubevirt_vmi_migration_data_processed_bytes{name="vm1",namespace="ns",node="n1"} 1.048576e+08
# HELP kubevirt_vmi_migration_data_remaining_bytes The remaining guest OS data to be migrated to the new VM.
# TYPE kubevirt_vmi_migration_data_remaining_bytes gauge
kubevirt_vmi_migration_data_remaining_bytes{name="vm1",namespace="ns",node="n1"} 5.24288e+07
`
	running := &launcher.MigrationStatus{State: launcher.MigrationRunning, Processed: 100 << 20, Remaining: 50 << 20}
	if err := testutil.CollectAndCompare(constCollector(migrationMetrics("n1", "ns", "vm1", running)), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	for _, st := range []*launcher.MigrationStatus{nil, {State: launcher.MigrationSucceeded, Processed: 1}, {State: launcher.MigrationFailed}} {
		if got := migrationMetrics("n1", "ns", "vm1", st); len(got) != 0 {
			t.Errorf("a migration that is not running (%+v): %d series", st, len(got))
		}
	}
}
