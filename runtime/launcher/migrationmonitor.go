package launcher

import (
	"fmt"
	"time"
)

// MigrationLimits bound a live migration, from the VMI's MigrationPolicy
// or the cluster's live migration configuration.
type MigrationLimits struct {
	// BandwidthMiB caps the memory stream, in MiB/s; 0 leaves it uncapped.
	BandwidthMiB uint64 `json:"bandwidthMiB,omitempty"`
	// CompletionTimeoutPerGiB is how long the migration may take per GiB
	// of memory and local disk before it switches to post-copy (when
	// allowed) or is aborted, in seconds.
	CompletionTimeoutPerGiB int64 `json:"completionTimeoutPerGiB"`
	// ProgressTimeout is how long the data remaining may stay without
	// going down before the migration is aborted, in seconds.
	ProgressTimeout   int64 `json:"progressTimeout"`
	AllowAutoConverge bool  `json:"allowAutoConverge,omitempty"`
	AllowPostCopy     bool  `json:"allowPostCopy,omitempty"`
	// AllowWorkloadDisruption pauses the guest past the completion
	// timeout (when post-copy is not allowed) instead of aborting, so
	// that the migration ends; the target resumes it.
	AllowWorkloadDisruption bool `json:"allowWorkloadDisruption,omitempty"`
	// MaxDowntimeMs is the longest pause of the guest at the switch-over
	// QEMU may plan for; 0 leaves libvirt's default.
	MaxDowntimeMs uint64 `json:"maxDowntimeMs,omitempty"`
}

// verdict is what the migration monitor decides at a look at the job.
type verdict int

const (
	goOn verdict = iota
	startPostCopy
	pauseGuest
	abort
)

// monitor judges a running migration by its progress, as KubeVirt's
// migration monitor does: aborted when the data remaining has not gone
// down for ProgressTimeout, and, past the completion timeout (per GiB of
// what it moves), switched to post-copy when allowed, else the guest
// paused when its workload may be disrupted, else aborted.
type monitor struct {
	limits   MigrationLimits
	started  time.Time
	totalGiB float64
	// least is the least data remaining seen, at lowestAt.
	least    uint64
	leastAt  time.Time
	postCopy bool
	paused   bool
}

func newMonitor(limits MigrationLimits, started time.Time, totalBytes uint64) *monitor {
	gib := float64(totalBytes) / (1 << 30)
	if gib < 1 {
		gib = 1
	}
	return &monitor{limits: limits, started: started, totalGiB: gib, leastAt: started}
}

// judge looks at the data remaining at now and says what to do, with the
// reason for an abort.
func (m *monitor) judge(now time.Time, remaining uint64) (verdict, string) {
	if remaining < m.least || m.least == 0 {
		m.least, m.leastAt = remaining, now
	}
	if m.postCopy {
		// Post-copy cannot be undone: the guest runs on the target.
		return goOn, ""
	}
	if p := time.Duration(m.limits.ProgressTimeout) * time.Second; p > 0 && now.Sub(m.leastAt) > p {
		return abort, fmt.Sprintf("Live migration stuck for %d seconds and has been aborted", int64(now.Sub(m.leastAt).Seconds()))
	}
	limit := time.Duration(float64(m.limits.CompletionTimeoutPerGiB) * m.totalGiB * float64(time.Second))
	if limit > 0 && now.Sub(m.started) > limit && !m.paused {
		switch {
		case m.limits.AllowPostCopy:
			m.postCopy = true
			return startPostCopy, ""
		case m.limits.AllowWorkloadDisruption:
			m.paused = true
			return pauseGuest, ""
		}
		return abort, fmt.Sprintf("Live migration is not completed after %d seconds and has been aborted", int64(limit.Seconds()))
	}
	return goOn, ""
}
