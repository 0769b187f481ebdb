package nodepool

import (
	"strings"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func condition(conds []hyperv1.NodePoolCondition, t string) *hyperv1.NodePoolCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func TestConditions(t *testing.T) {
	up := Machine{Name: "w-1", VMReady: true, NodeReady: true, NodeVersion: "v1.33.0"}
	booting := Machine{Name: "w-2"}
	joining := Machine{Name: "w-3", VMReady: true}
	for _, tc := range []struct {
		name                    string
		o                       Observed
		ready, machines, nodes  corev1.ConditionStatus
		readyReason, msgContain string
	}{
		{"no cluster", Observed{Blocked: &Problem{HostedClusterNotFoundReason, "HostedCluster clusters/x does not exist"}, Desired: 2},
			corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionTrue, HostedClusterNotFoundReason, "clusters/x"},
		{"control plane not ready", Observed{Blocked: &Problem{WaitingForControlPlane, "waiting"}, Desired: 1},
			corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionTrue, WaitingForControlPlane, "waiting"},
		{"caching", Observed{Desired: 1, Cache: "np-boot-cache-1", CacheMessage: "ImportInProgress 40%"},
			corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionTrue, CachingBootImageReason, "40%"},
		{"scaling up", Observed{Desired: 3, Machines: []Machine{up, booting, joining}},
			corev1.ConditionFalse, corev1.ConditionFalse, corev1.ConditionFalse, ScalingUpReason, "1 of 3 nodes Ready"},
		{"scaling down", Observed{Desired: 1, Machines: []Machine{up, {Name: "w-9", Removing: true, VMReady: true, NodeReady: true}}},
			corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionTrue, ScalingDownReason, "removing w-9"},
		{"ready", Observed{Desired: 1, Machines: []Machine{up}},
			corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionTrue, hyperv1.AsExpectedReason, "1 of 1 nodes Ready"},
		{"zero replicas", Observed{Desired: 0},
			corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionTrue, hyperv1.AsExpectedReason, "0 of 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := Conditions(tc.o, 4)
			r := condition(conds, hyperv1.NodePoolReadyConditionType)
			if r == nil || r.Status != tc.ready || r.Reason != tc.readyReason || !strings.Contains(r.Message, tc.msgContain) || r.ObservedGeneration != 4 {
				t.Errorf("Ready = %+v, want %s %s containing %q", r, tc.ready, tc.readyReason, tc.msgContain)
			}
			if m := condition(conds, hyperv1.NodePoolAllMachinesReadyConditionType); m.Status != tc.machines {
				t.Errorf("AllMachinesReady = %+v, want %s", m, tc.machines)
			}
			if n := condition(conds, hyperv1.NodePoolAllNodesHealthyConditionType); n.Status != tc.nodes {
				t.Errorf("AllNodesHealthy = %+v, want %s", n, tc.nodes)
			}
		})
	}
}

func TestAllMachinesReadyNamesTheOthers(t *testing.T) {
	conds := Conditions(Observed{Desired: 2, Machines: []Machine{{Name: "w-1", VMReady: true, NodeReady: true}, {Name: "w-2"}}}, 1)
	if m := condition(conds, hyperv1.NodePoolAllMachinesReadyConditionType); !strings.HasSuffix(m.Message, ": w-2") {
		t.Errorf("AllMachinesReady message %q", m.Message)
	}
	if n := condition(conds, hyperv1.NodePoolAllNodesHealthyConditionType); !strings.HasSuffix(n.Message, ": w-2") {
		t.Errorf("AllNodesHealthy message %q", n.Message)
	}
}

func TestApply(t *testing.T) {
	t0, t1 := metav1.Unix(100, 0), metav1.Unix(200, 0)
	st := &hyperv1.NodePoolStatus{Conditions: []hyperv1.NodePoolCondition{{Type: "Other", Status: corev1.ConditionTrue}}}
	Apply(st, Observed{Desired: 2, Cache: "c", Machines: []Machine{{Name: "a", VMReady: true, NodeReady: true, NodeVersion: "v1.33.0"}, {Name: "b"}}}, 1, t0)
	if st.Replicas != 1 || st.Version != "v1.33.0" || st.Platform == nil || st.Platform.KubeVirt.CacheName != "c" {
		t.Fatalf("status %+v", st)
	}
	if condition(st.Conditions, "Other") == nil {
		t.Error("another controller's condition was dropped")
	}
	Apply(st, Observed{Desired: 2, Cache: "c", Machines: []Machine{{Name: "a", VMReady: true, NodeReady: true, NodeVersion: "v1.33.0"}, {Name: "b", VMReady: true}}}, 1, t1)
	if c := condition(st.Conditions, hyperv1.NodePoolReadyConditionType); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Ready stayed False but its transition time moved to %v", c.LastTransitionTime)
	}
	if c := condition(st.Conditions, hyperv1.NodePoolAllMachinesReadyConditionType); !c.LastTransitionTime.Equal(&t1) || c.Status != corev1.ConditionTrue {
		t.Errorf("AllMachinesReady became True at %v: %+v", t1, c)
	}
	// A pool whose nodes all went keeps reporting the version it had.
	Apply(st, Observed{Desired: 0}, 2, t1)
	if st.Replicas != 0 || st.Version != "v1.33.0" {
		t.Errorf("after scaling to zero: replicas %d version %q", st.Replicas, st.Version)
	}
}

func TestCacheProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   cdiv1.DataVolumeStatus
		want string
	}{
		{"just created", cdiv1.DataVolumeStatus{}, "Pending"},
		{"importing", cdiv1.DataVolumeStatus{Phase: cdiv1.ImportInProgress, Progress: "40.0%"}, "ImportInProgress 40.0%"},
		{"failed", cdiv1.DataVolumeStatus{Phase: cdiv1.Failed, Progress: "N/A", Conditions: []cdiv1.DataVolumeCondition{
			{Type: cdiv1.DataVolumeRunning, Message: "import failed: not found"}}}, "Failed: import failed: not found"},
		{"done", cdiv1.DataVolumeStatus{Phase: cdiv1.Succeeded, Progress: "100.0%"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CacheProgress(&cdiv1.DataVolume{Status: tc.st}); got != tc.want {
				t.Errorf("CacheProgress = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAllMachinesReadySaysWhyUnschedulable: a worker no node takes (no node
// advertises its host devices) is named with the scheduler's message.
func TestAllMachinesReadySaysWhyUnschedulable(t *testing.T) {
	msg := "0/2 nodes are available: 2 Insufficient nvidia.com/A100."
	conds := Conditions(Observed{Desired: 1, Machines: []Machine{{Name: "w-1", Unschedulable: msg}}}, 1)
	want := "VirtualMachines not ready: w-1 (unschedulable: " + msg + ")"
	if m := condition(conds, hyperv1.NodePoolAllMachinesReadyConditionType); m.Message != want {
		t.Errorf("AllMachinesReady message %q, want %q", m.Message, want)
	}
}
