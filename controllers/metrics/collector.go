package metrics

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=get;list;watch

var (
	phaseCount = prometheus.NewDesc("kubevirt_vmi_phase_count",
		"Number of VMIs by node and phase.", []string{"node", "phase"}, nil)
	outdated = prometheus.NewDesc("kubevirt_vmi_number_of_outdated",
		"Indication for the total number of VirtualMachineInstance workloads that are not running within the most up-to-date version of the virt-launcher environment.", nil, nil)
	importProgress = prometheus.NewDesc("kubevirt_cdi_import_progress_total",
		"Progress of each importing DataVolume, in percent.", []string{"namespace", "name", "phase"}, nil)
	// KubeVirt's migration gauges: migrations in flight by phase group,
	// and one series per migration that ended.
	migrationsIn   = map[string]*prometheus.Desc{}
	migrationEnded = map[v1.VirtualMachineInstanceMigrationPhase]*prometheus.Desc{
		v1.MigrationSucceeded: prometheus.NewDesc("kubevirt_vmi_migration_succeeded",
			"Migrations that succeeded.", []string{"vmi", "vmim", "namespace"}, nil),
		v1.MigrationFailed: prometheus.NewDesc("kubevirt_vmi_migration_failed",
			"Migrations that failed.", []string{"vmi", "vmim", "namespace"}, nil),
	}
)

// phaseTransition is KubeVirt's histogram of how long migrations took
// from their creation to each phase they reached.
var phaseTransition = prometheus.NewDesc("kubevirt_vmi_migration_phase_transition_time_from_creation_seconds",
	"Histogram of VM migration phase transitions duration from creation time in seconds.", []string{"phase"}, nil)

// PhaseTransitionBuckets are the histogram's upper bounds, in seconds.
var PhaseTransitionBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600}

// Histogram is one phase's observations: their count and sum, and how
// many are at most each of PhaseTransitionBuckets.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// PhaseTransitions are, by phase, the seconds from each migration's
// creation to its reaching the phase (status.phaseTransitionTimestamps).
func PhaseTransitions(ms []v1.VirtualMachineInstanceMigration) map[string]*Histogram {
	out := map[string]*Histogram{}
	for _, m := range ms {
		for _, tr := range m.Status.PhaseTransitionTimestamps {
			h := out[string(tr.Phase)]
			if h == nil {
				h = &Histogram{Buckets: map[float64]uint64{}}
				for _, b := range PhaseTransitionBuckets {
					h.Buckets[b] = 0
				}
				out[string(tr.Phase)] = h
			}
			secs := max(0, tr.PhaseTransitionTimestamp.Sub(m.CreationTimestamp.Time).Seconds())
			h.Count++
			h.Sum += secs
			for _, b := range PhaseTransitionBuckets {
				if secs <= b {
					h.Buckets[b]++
				}
			}
		}
	}
	return out
}

// MigrationGroups are the phase groups KubeVirt counts migrations in
// flight by, each with its phases.
var MigrationGroups = map[string][]v1.VirtualMachineInstanceMigrationPhase{
	"unset":      {v1.MigrationPhaseUnset},
	"pending":    {v1.MigrationPending},
	"scheduling": {v1.MigrationScheduling, v1.MigrationScheduled, v1.MigrationPreparingTarget, v1.MigrationTargetReady},
	"running":    {v1.MigrationRunning},
}

func init() {
	for group := range MigrationGroups {
		migrationsIn[group] = prometheus.NewDesc("kubevirt_vmi_migrations_in_"+group+"_phase",
			"Migrations in the "+group+" phase.", nil, nil)
	}
}

// MigrationCounts are how many migrations are in each of MigrationGroups.
func MigrationCounts(ms []v1.VirtualMachineInstanceMigration) map[string]int {
	out := map[string]int{}
	for group, phases := range MigrationGroups {
		out[group] = 0
		for _, m := range ms {
			for _, p := range phases {
				if m.Status.Phase == p {
					out[group]++
				}
			}
		}
	}
	return out
}

// Collector reads VMIs and DataVolumes from Reader when scraped.
type Collector struct {
	Reader client.Reader
}

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- phaseCount
	ch <- outdated
	ch <- importProgress
	for _, d := range migrationsIn {
		ch <- d
	}
	for _, d := range migrationEnded {
		ch <- d
	}
	ch <- phaseTransition
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := ctrl.Log.WithName("metrics")
	var vmis v1.VirtualMachineInstanceList
	if err := c.Reader.List(ctx, &vmis); err != nil {
		log.Error(err, "listing VirtualMachineInstances")
	}
	for _, p := range PhaseCounts(vmis.Items) {
		ch <- prometheus.MustNewConstMetric(phaseCount, prometheus.GaugeValue, float64(p.Count), p.Node, p.Phase)
	}
	n := 0
	for _, vmi := range vmis.Items {
		if _, ok := vmi.Labels[v1.OutdatedLauncherImageLabel]; ok {
			n++
		}
	}
	ch <- prometheus.MustNewConstMetric(outdated, prometheus.GaugeValue, float64(n))
	var migrations v1.VirtualMachineInstanceMigrationList
	if err := c.Reader.List(ctx, &migrations); err != nil {
		log.Error(err, "listing VirtualMachineInstanceMigrations")
	}
	for group, n := range MigrationCounts(migrations.Items) {
		ch <- prometheus.MustNewConstMetric(migrationsIn[group], prometheus.GaugeValue, float64(n))
	}
	for _, m := range migrations.Items {
		if d := migrationEnded[m.Status.Phase]; d != nil {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1, m.Spec.VMIName, m.Name, m.Namespace)
		}
	}
	for phase, h := range PhaseTransitions(migrations.Items) {
		ch <- prometheus.MustNewConstHistogram(phaseTransition, h.Count, h.Sum, h.Buckets, phase)
	}
	var dvs cdiv1.DataVolumeList
	if err := c.Reader.List(ctx, &dvs); err != nil {
		log.Error(err, "listing DataVolumes")
	}
	for _, dv := range dvs.Items {
		if pct, ok := Percent(dv.Status.Progress); ok {
			ch <- prometheus.MustNewConstMetric(importProgress, prometheus.GaugeValue, pct, dv.Namespace, dv.Name, string(dv.Status.Phase))
		}
	}
}

// PhaseCount is the number of VMIs in one phase on one node ("" while
// unscheduled).
type PhaseCount struct {
	Node, Phase string
	Count       int
}

// PhaseCounts groups vmis by node and phase (lower-case, as KubeVirt
// reports it), sorted.
func PhaseCounts(vmis []v1.VirtualMachineInstance) []PhaseCount {
	counts := map[[2]string]int{}
	for _, vmi := range vmis {
		phase := strings.ToLower(string(vmi.Status.Phase))
		if phase == "" {
			phase = "pending"
		}
		counts[[2]string{vmi.Status.NodeName, phase}]++
	}
	out := make([]PhaseCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, PhaseCount{Node: k[0], Phase: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Phase < out[j].Phase
	})
	return out
}

// Percent reads a DataVolume's progress ("45.2%"); "N/A" and "" are not
// progress.
func Percent(p cdiv1.DataVolumeProgress) (float64, bool) {
	s, ok := strings.CutSuffix(string(p), "%")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v > 100 {
		return 0, false
	}
	return v, true
}
