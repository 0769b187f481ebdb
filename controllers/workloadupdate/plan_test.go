package workloadupdate

import (
	"slices"
	"testing"
	"time"

	v1 "kubevirt.io/api/core/v1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	c := func(name string, outdated, migratable, migrating bool) Candidate {
		return Candidate{Namespace: "ns", Name: name, Pod: "virt-launcher-" + name, Outdated: outdated, Migratable: migratable, Migrating: migrating}
	}
	all := []Candidate{
		c("current", false, true, false),
		c("old-a", true, true, false),
		c("old-b", true, true, false),
		c("old-pinned", true, false, false),
		c("old-moving", true, true, true),
	}
	live := Strategy{Methods: []v1.WorkloadUpdateMethod{v1.WorkloadUpdateMethodLiveMigrate}, BatchSize: 10, Interval: time.Minute}
	both := Strategy{Methods: []v1.WorkloadUpdateMethod{v1.WorkloadUpdateMethodLiveMigrate, v1.WorkloadUpdateMethodEvict}, BatchSize: 10, Interval: time.Minute}
	evict := Strategy{Methods: []v1.WorkloadUpdateMethod{v1.WorkloadUpdateMethodEvict}, BatchSize: 2, Interval: time.Minute}
	names := func(cs []Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		s             Strategy
		running, max  int
		last          time.Time
		migrate, evic []string
	}{
		{name: "LiveMigrate: the migratable ones migrate; the pinned one stays", s: live, max: 5, migrate: []string{"old-a", "old-b"}},
		{name: "LiveMigrate within the cluster's limit", s: live, running: 4, max: 5, migrate: []string{"old-a"}},
		{name: "LiveMigrate at the limit: none", s: live, running: 5, max: 5},
		{name: "LiveMigrate then Evict: the pinned one is evicted", s: both, max: 5, migrate: []string{"old-a", "old-b"}, evic: []string{"old-pinned"}},
		{name: "Evict only: in batches", s: evict, max: 5, evic: []string{"old-a", "old-b"}},
		{name: "Evict: not before the interval", s: evict, max: 5, last: now.Add(-30 * time.Second)},
		{name: "Evict: the next batch after it", s: evict, max: 5, last: now.Add(-time.Minute), evic: []string{"old-a", "old-b"}},
		{name: "no methods: nothing", s: Strategy{}, max: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(all, tc.s, tc.running, tc.max, tc.last, now)
			if p.Outdated != 4 {
				t.Errorf("Outdated = %d, want 4", p.Outdated)
			}
			if got := names(p.Migrate); !slices.Equal(got, tc.migrate) {
				t.Errorf("Migrate = %v, want %v", got, tc.migrate)
			}
			if got := names(p.Evict); !slices.Equal(got, tc.evic) {
				t.Errorf("Evict = %v, want %v", got, tc.evic)
			}
		})
	}
}
