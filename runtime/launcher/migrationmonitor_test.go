package launcher

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestMonitorJudge(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	limits := MigrationLimits{CompletionTimeoutPerGiB: 10, ProgressTimeout: 5}
	type look struct {
		sec       int
		remaining uint64
		want      verdict
		reason    string
	}
	for _, tc := range []struct {
		name   string
		limits MigrationLimits
		total  uint64
		looks  []look
	}{
		{name: "progressing: on", limits: limits, total: 256 << 20, looks: []look{{1, 900, goOn, ""}, {4, 500, goOn, ""}, {8, 100, goOn, ""}}},
		{name: "stalled past the progress timeout: aborted", limits: limits, total: 256 << 20,
			looks: []look{{1, 500, goOn, ""}, {3, 600, goOn, ""}, {6, 550, goOn, ""}, {7, 520, abort, "stuck for 6 seconds"}}},
		{name: "the least remaining counts, not the last", limits: limits, total: 256 << 20,
			looks: []look{{1, 500, goOn, ""}, {5, 400, goOn, ""}, {9, 450, goOn, ""}, {11, 420, abort, "stuck for 6 seconds"}}},
		{name: "small guests get a GiB's time", limits: limits, total: 256 << 20,
			looks: []look{{4, 900, goOn, ""}, {8, 800, goOn, ""}, {11, 700, abort, "not completed after 10 seconds"}}},
		{name: "two GiB, twice the time", limits: limits, total: 2 << 30,
			looks: []look{{4, 900, goOn, ""}, {8, 800, goOn, ""}, {12, 700, goOn, ""}, {16, 600, goOn, ""}, {21, 500, abort, "not completed after 20 seconds"}}},
		{name: "post-copy when allowed, then never aborted", limits: MigrationLimits{CompletionTimeoutPerGiB: 10, ProgressTimeout: 5, AllowPostCopy: true}, total: 256 << 20,
			looks: []look{{4, 900, goOn, ""}, {8, 800, goOn, ""}, {11, 700, startPostCopy, ""}, {30, 700, goOn, ""}}},
		{name: "paused when the workload may be disrupted, then only progress counts", limits: MigrationLimits{CompletionTimeoutPerGiB: 10, ProgressTimeout: 5, AllowWorkloadDisruption: true}, total: 256 << 20,
			looks: []look{{4, 900, goOn, ""}, {8, 800, goOn, ""}, {11, 700, pauseGuest, ""}, {14, 100, goOn, ""}, {20, 100, abort, "stuck for 6 seconds"}}},
		{name: "post-copy is preferred to a pause", limits: MigrationLimits{CompletionTimeoutPerGiB: 10, AllowPostCopy: true, AllowWorkloadDisruption: true}, total: 256 << 20,
			looks: []look{{11, 700, startPostCopy, ""}}},
		{name: "no limits", limits: MigrationLimits{}, total: 256 << 20, looks: []look{{100, 900, goOn, ""}, {1000, 900, goOn, ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMonitor(tc.limits, t0, tc.total)
			for _, l := range tc.looks {
				got, reason := m.judge(at(l.sec), l.remaining)
				if got != l.want || !strings.Contains(reason, l.reason) || (l.reason == "" && reason != "") {
					t.Fatalf("at %ds with %d remaining: %v %q, want %v %q", l.sec, l.remaining, got, reason, l.want, l.reason)
				}
			}
		})
	}
}

// TestOutgoingEnded: a launcher whose domain left waits for the outcome
// of the migration that runs (it may end a moment after the domain).
func TestOutgoingEnded(t *testing.T) {
	ctx := context.Background()
	if st := (&outgoing{}).ended(ctx, time.Second); st != nil {
		t.Fatalf("no migration: %+v", st)
	}
	o := &outgoing{status: &MigrationStatus{State: MigrationRunning}}
	go func() {
		time.Sleep(100 * time.Millisecond)
		o.update(func(st *MigrationStatus) { st.State = MigrationSucceeded })
	}()
	if st := o.ended(ctx, 10*time.Second); st == nil || st.State != MigrationSucceeded {
		t.Fatalf("a migration ending a moment later: %+v", st)
	}
	stuck := &outgoing{status: &MigrationStatus{State: MigrationRunning}}
	if st := stuck.ended(ctx, 100*time.Millisecond); st == nil || st.State != MigrationRunning {
		t.Fatalf("a migration still running past the wait: %+v", st)
	}
}
