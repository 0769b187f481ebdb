package hostedcluster

import (
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConditions(t *testing.T) {
	running := &Run{Name: "provision-hosted-cluster-abc", Message: "Tasks Completed: 2 (Failed: 0, Cancelled 0), Skipped: 0"}
	failed := &Run{Name: "provision-hosted-cluster-abc", Done: true, Message: `"etcd" exited with code 1`}
	done := &Run{Name: "provision-hosted-cluster-abc", Done: true, Succeeded: true, Version: "v1.34.4"}
	type want struct{ available, progressing, degraded, reason string }
	tests := []struct {
		name string
		obs  Observed
		want want
	}{
		{"namespace of another cluster", Observed{Conflict: "namespace a-b holds the control plane of HostedCluster a-x/b"},
			want{"False", "False", "True", NamespaceConflictReason}},
		{"no run yet", Observed{}, want{"False", "True", "False", hyperv1.WaitingForAvailableReason}},
		{"running", Observed{Run: running}, want{"False", "True", "False", hyperv1.WaitingForAvailableReason}},
		{"failed", Observed{Run: failed}, want{"False", "False", "True", ProvisioningFailedReason}},
		{"succeeded, API server down", Observed{Run: done}, want{"False", "False", "True", APIServerUnavailable}},
		{"succeeded, API server ready", Observed{Run: done, APIServerReady: true}, want{"True", "False", "False", hyperv1.AsExpectedReason}},
		{"failed even though an API server runs", Observed{Run: failed, APIServerReady: true}, want{"False", "False", "True", ProvisioningFailedReason}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]metav1.Condition{}
			for _, c := range Conditions(tt.obs, 7) {
				got[c.Type] = c
				if c.ObservedGeneration != 7 {
					t.Errorf("%s: observedGeneration %d", c.Type, c.ObservedGeneration)
				}
				if c.Reason == "" {
					t.Errorf("%s: no reason", c.Type)
				}
			}
			if len(got) != 3 {
				t.Fatalf("conditions: %v", got)
			}
			av, pr, dg := got["Available"], got["Progressing"], got["Degraded"]
			if string(av.Status) != tt.want.available || string(pr.Status) != tt.want.progressing || string(dg.Status) != tt.want.degraded {
				t.Errorf("Available/Progressing/Degraded = %s/%s/%s, want %s/%s/%s", av.Status, pr.Status, dg.Status,
					tt.want.available, tt.want.progressing, tt.want.degraded)
			}
			if av.Reason != tt.want.reason {
				t.Errorf("Available reason %q, want %q", av.Reason, tt.want.reason)
			}
		})
	}
}

func TestConditionsNameTheRunAndItsMessage(t *testing.T) {
	cs := Conditions(Observed{Run: &Run{Name: "run-1", Done: true, Message: "task etcd failed: timeout"}}, 1)
	for _, c := range cs {
		if c.Type == "Degraded" && c.Message != "PipelineRun run-1 failed: task etcd failed: timeout (delete it to run again)" {
			t.Errorf("Degraded message %q", c.Message)
		}
	}
}

func TestApplyVersionHistory(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	st := &hyperv1.HostedClusterStatus{}
	Apply(st, Observed{Run: &Run{Name: "r1", Started: t0}}, 1, "reg/release:a", t0)
	if h := st.Version.History; len(h) != 1 || h[0].State != configv1.PartialUpdate || h[0].Image != "reg/release:a" {
		t.Fatalf("history while provisioning: %+v", h)
	}
	if st.Version.Desired.Image != "reg/release:a" {
		t.Errorf("desired %q", st.Version.Desired.Image)
	}
	Apply(st, Observed{Run: &Run{Name: "r1", Started: t0, Done: true, Succeeded: true, Version: "v1.34.4", Completed: t1}, APIServerReady: true}, 1, "reg/release:a", t1)
	h := st.Version.History
	if len(h) != 1 || h[0].State != configv1.CompletedUpdate || h[0].Version != "v1.34.4" || h[0].CompletionTime == nil || !h[0].CompletionTime.Equal(&t1) {
		t.Fatalf("history once provisioned: %+v", h)
	}
	// A later run of the same release (a spec change that keeps it) keeps the entry.
	Apply(st, Observed{Run: &Run{Name: "r2", Started: t1}}, 2, "reg/release:a", t1)
	if h := st.Version.History; len(h) != 1 || h[0].State != configv1.CompletedUpdate {
		t.Fatalf("history after a re-run: %+v", h)
	}
	// A new release goes on top, partial until its run succeeds.
	Apply(st, Observed{Run: &Run{Name: "r3", Started: t1}}, 3, "reg/release:b", t1)
	if h := st.Version.History; len(h) != 2 || h[0].Image != "reg/release:b" || h[0].State != configv1.PartialUpdate || h[1].Image != "reg/release:a" {
		t.Fatalf("history after an upgrade began: %+v", h)
	}
	// The Available transition time moves only when the status changes.
	var av metav1.Condition
	for _, c := range st.Conditions {
		if c.Type == "Available" {
			av = c
		}
	}
	if av.Status != metav1.ConditionFalse {
		t.Errorf("Available %s during the upgrade run", av.Status)
	}
	Apply(st, Observed{Conflict: "x"}, 4, "reg/release:c", t1)
	if st.Version.Desired.Image != "reg/release:b" {
		t.Errorf("a conflict changed the desired release to %q", st.Version.Desired.Image)
	}
}
