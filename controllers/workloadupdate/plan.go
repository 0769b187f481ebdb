package workloadupdate

import (
	"slices"
	"time"

	v1 "kubevirt.io/api/core/v1"
)

// Candidate is a running VMI as the updater sees it.
type Candidate struct {
	Namespace, Name string
	// Pod is the VMI's launcher Pod.
	Pod string
	// Outdated: the Pod runs another launcher image than the current one.
	Outdated bool
	// Migratable: the VMI's LiveMigratable condition is True.
	Migratable bool
	// Migrating: a migration of the VMI has not ended.
	Migrating bool
}

// Strategy is the HyperConverged's workloadUpdateStrategy.
type Strategy struct {
	Methods   []v1.WorkloadUpdateMethod
	BatchSize int
	Interval  time.Duration
}

// Plan is what the updater does now.
type Plan struct {
	// Migrate are the VMIs to live-migrate to a new launcher.
	Migrate []Candidate
	// Evict are the VMIs whose launcher Pod to evict.
	Evict []Candidate
	// Outdated counts the outdated VMIs.
	Outdated int
}

// Decide plans the updates of candidates under strategy s, as KubeVirt's
// workload updater: with LiveMigrate, outdated VMIs that can migrate (and
// do not) get a migration each, as long as fewer than maxMigrations run in
// the cluster (running do now); with Evict, the other outdated VMIs (all
// of them without LiveMigrate) are evicted, BatchSize at a time once
// Interval has passed since the last batch (lastEviction, zero: none yet).
func Decide(candidates []Candidate, s Strategy, running, maxMigrations int, lastEviction, now time.Time) Plan {
	var p Plan
	live := slices.Contains(s.Methods, v1.WorkloadUpdateMethodLiveMigrate)
	evict := slices.Contains(s.Methods, v1.WorkloadUpdateMethodEvict)
	batchDue := lastEviction.IsZero() || now.Sub(lastEviction) >= s.Interval
	for _, c := range candidates {
		if !c.Outdated {
			continue
		}
		p.Outdated++
		if c.Migrating {
			continue
		}
		switch {
		case live && c.Migratable:
			if running+len(p.Migrate) < maxMigrations {
				p.Migrate = append(p.Migrate, c)
			}
		case evict && batchDue && len(p.Evict) < max(1, s.BatchSize):
			p.Evict = append(p.Evict, c)
		}
	}
	return p
}
