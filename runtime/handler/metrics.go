package handler

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/launcher"
)

// statsTimeout bounds one launcher's answer during a scrape: a launcher
// that hangs drops its VMI's series, not the scrape.
const statsTimeout = 2 * time.Second

var (
	vmiLabels       = []string{"node", "namespace", "name"}
	descMemResident = prometheus.NewDesc("kubevirt_vmi_memory_resident_bytes",
		"Resident set size of the process running the domain.", vmiLabels, nil)
	descMemDomain = prometheus.NewDesc("kubevirt_vmi_memory_domain_bytes",
		"The amount of memory in bytes allocated to the domain.", vmiLabels, nil)
	descCPUUsage = prometheus.NewDesc("kubevirt_vmi_cpu_usage_seconds_total",
		"Total CPU time spent in all modes (vCPUs and hypervisor).", vmiLabels, nil)
	descVCPUSeconds = prometheus.NewDesc("kubevirt_vmi_vcpu_seconds_total",
		"Total amount of time spent in each state by each vCPU.", append(append([]string{}, vmiLabels...), "id", "state"), nil)
	descMigrationProcessed = prometheus.NewDesc("kubevirt_vmi_migration_data_processed_bytes",
		"The total Guest OS data processed and migrated to the new VM.", vmiLabels, nil)
	descMigrationRemaining = prometheus.NewDesc("kubevirt_vmi_migration_data_remaining_bytes",
		"The remaining guest OS data to be migrated to the new VM.", vmiLabels, nil)
)

// VMIMetrics collects the resource use of the VMIs running on the node,
// and the progress of those migrating away, from their launchers at scrape
// time, under KubeVirt's metric names.
type VMIMetrics struct{ *Handler }

// Describe implements prometheus.Collector.
func (m VMIMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemResident, descMemDomain, descCPUUsage, descVCPUSeconds, descMigrationProcessed, descMigrationRemaining} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m VMIMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	var vmis v1.VirtualMachineInstanceList
	if err := m.Client.List(ctx, &vmis, client.MatchingLabels{v1.NodeNameLabel: m.Node}); err != nil {
		ctrl.Log.WithName("metrics").Error(err, "listing the node's VMIs")
		return
	}
	var wg sync.WaitGroup
	for i := range vmis.Items {
		vmi := &vmis.Items[i]
		if vmi.Status.Phase != v1.Running || vmi.Status.NodeName != m.Node {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := m.dirFor(vmi)
			if err != nil {
				return
			}
			st, err := d.client().Stats(ctx)
			if err != nil {
				return
			}
			for _, metric := range vmiMetrics(m.Node, vmi.Namespace, vmi.Name, st) {
				ch <- metric
			}
			if ms := migrating(vmi); ms == nil || ms.SourceNode != m.Node {
				return
			}
			status, err := d.client().Status(ctx)
			if err != nil {
				return
			}
			for _, metric := range migrationMetrics(m.Node, vmi.Namespace, vmi.Name, status.Migration) {
				ch <- metric
			}
		}()
	}
	wg.Wait()
}

// vmiMetrics are the series of one VMI's stats.
func vmiMetrics(node, ns, name string, st *launcher.Stats) []prometheus.Metric {
	out := []prometheus.Metric{
		prometheus.MustNewConstMetric(descMemResident, prometheus.GaugeValue, float64(st.MemoryResidentBytes), node, ns, name),
		prometheus.MustNewConstMetric(descMemDomain, prometheus.GaugeValue, float64(st.MemoryDomainBytes), node, ns, name),
		prometheus.MustNewConstMetric(descCPUUsage, prometheus.CounterValue, st.CPUSeconds, node, ns, name),
	}
	for _, v := range st.VCPUs {
		out = append(out, prometheus.MustNewConstMetric(descVCPUSeconds, prometheus.CounterValue, v.Seconds, node, ns, name, strconv.Itoa(v.ID), v.State))
	}
	return out
}

// migrationMetrics are the series of a migration the launcher runs (none
// once it ended).
func migrationMetrics(node, ns, name string, st *launcher.MigrationStatus) []prometheus.Metric {
	if st == nil || st.State != launcher.MigrationRunning {
		return nil
	}
	return []prometheus.Metric{
		prometheus.MustNewConstMetric(descMigrationProcessed, prometheus.GaugeValue, float64(st.Processed), node, ns, name),
		prometheus.MustNewConstMetric(descMigrationRemaining, prometheus.GaugeValue, float64(st.Remaining), node, ns, name),
	}
}
