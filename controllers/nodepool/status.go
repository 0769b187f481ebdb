package nodepool

import (
	"fmt"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// Reasons this controller reports besides HyperShift's AsExpected.
const (
	HostedClusterNotFoundReason = "HostedClusterNotFound"
	WaitingForControlPlane      = "WaitingForControlPlane"
	InvalidPlatformReason       = "InvalidPlatformConfig"
	CachingBootImageReason      = "CachingBootImage"
	ScalingUpReason             = "ScalingUp"
	ScalingDownReason           = "ScalingDown"
	MachinesNotReadyReason      = "MachinesNotReady"
	NodesNotReadyReason         = "NodesNotReady"
)

// Problem is why no worker can be made yet.
type Problem struct{ Reason, Message string }

// Observed is what the reconciler found.
type Observed struct {
	// Blocked, when set, says why the pool cannot have workers yet.
	Blocked  *Problem
	Desired  int
	Machines []Machine
	// Cache is the boot-image cache DataVolume's name, CacheMessage how its
	// import is doing while it is not done.
	Cache, CacheMessage string
	Autoscaling         bool
}

func (o Observed) staying() []Machine {
	var out []Machine
	for _, m := range o.Machines {
		if !m.Removing {
			out = append(out, m)
		}
	}
	return out
}

func namesWhere(ms []Machine, keep func(Machine) bool) []string {
	var out []string
	for _, m := range ms {
		if keep(m) {
			out = append(out, m.Name)
		}
	}
	return out
}

// Conditions are the NodePool conditions for o, as HyperShift names them.
func Conditions(o Observed, generation int64) []hyperv1.NodePoolCondition {
	cond := func(t string, ok bool, reason, msg string) hyperv1.NodePoolCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return hyperv1.NodePoolCondition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation}
	}
	out := []hyperv1.NodePoolCondition{cond(hyperv1.NodePoolAutoscalingEnabledConditionType, o.Autoscaling, hyperv1.AsExpectedReason, "")}
	if o.Blocked != nil && o.Blocked.Reason == InvalidPlatformReason {
		out = append(out, cond(hyperv1.NodePoolValidPlatformConfigConditionType, false, o.Blocked.Reason, o.Blocked.Message))
	} else {
		out = append(out, cond(hyperv1.NodePoolValidPlatformConfigConditionType, true, hyperv1.AsExpectedReason, ""))
	}
	staying := o.staying()
	notRunning := namesWhere(staying, func(m Machine) bool { return !m.VMReady })
	for i, name := range notRunning {
		for _, m := range staying {
			if m.Name == name && m.Unschedulable != "" {
				notRunning[i] += " (unschedulable: " + m.Unschedulable + ")"
			}
		}
	}
	if len(notRunning) == 0 {
		out = append(out, cond(hyperv1.NodePoolAllMachinesReadyConditionType, true, hyperv1.AsExpectedReason, "All is well"))
	} else {
		out = append(out, cond(hyperv1.NodePoolAllMachinesReadyConditionType, false, MachinesNotReadyReason,
			"VirtualMachines not ready: "+strings.Join(notRunning, ", ")))
	}
	notReady := namesWhere(staying, func(m Machine) bool { return !m.NodeReady })
	if len(notReady) == 0 {
		out = append(out, cond(hyperv1.NodePoolAllNodesHealthyConditionType, true, hyperv1.AsExpectedReason, "All is well"))
	} else {
		out = append(out, cond(hyperv1.NodePoolAllNodesHealthyConditionType, false, NodesNotReadyReason,
			"Nodes not Ready in the hosted cluster: "+strings.Join(notReady, ", ")))
	}
	ready := len(staying) - len(notReady)
	removing := len(o.Machines) - len(staying)
	counts := fmt.Sprintf("%d of %d nodes Ready", ready, o.Desired)
	switch {
	case o.Blocked != nil:
		out = append(out, cond(hyperv1.NodePoolReadyConditionType, false, o.Blocked.Reason, o.Blocked.Message))
	case o.CacheMessage != "":
		out = append(out, cond(hyperv1.NodePoolReadyConditionType, false, CachingBootImageReason,
			fmt.Sprintf("%s; boot image cache %s: %s", counts, o.Cache, o.CacheMessage)))
	case removing > 0:
		out = append(out, cond(hyperv1.NodePoolReadyConditionType, false, ScalingDownReason,
			fmt.Sprintf("%s; draining and removing %s", counts, strings.Join(namesWhere(o.Machines, func(m Machine) bool { return m.Removing }), ", "))))
	case ready < o.Desired:
		out = append(out, cond(hyperv1.NodePoolReadyConditionType, false, ScalingUpReason, counts))
	default:
		out = append(out, cond(hyperv1.NodePoolReadyConditionType, true, hyperv1.AsExpectedReason, counts))
	}
	return out
}

// CacheProgress says how the cache DataVolume's import is doing, or ""
// once it has succeeded (a DataVolume without a phase yet is Pending).
func CacheProgress(dv *cdiv1.DataVolume) string {
	if dv.Status.Phase == cdiv1.Succeeded {
		return ""
	}
	msg := string(dv.Status.Phase)
	if msg == "" {
		msg = string(cdiv1.Pending)
	}
	if dv.Status.Progress != "" && dv.Status.Progress != "N/A" {
		msg += " " + string(dv.Status.Progress)
	}
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeRunning && c.Message != "" {
			msg += ": " + c.Message
		}
	}
	return msg
}

// Ready says whether o makes the pool Ready.
func Ready(o Observed) bool {
	for _, c := range Conditions(o, 0) {
		if c.Type == hyperv1.NodePoolReadyConditionType {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Apply sets o on status: the conditions (keeping the transition time of
// those whose status did not change, and any other condition), the count
// of Ready nodes, their kubelet version and the cache's name.
func Apply(status *hyperv1.NodePoolStatus, o Observed, generation int64, now metav1.Time) {
	for _, c := range Conditions(o, generation) {
		c.LastTransitionTime = now
		setCondition(&status.Conditions, c)
	}
	status.Replicas = 0
	version := ""
	for _, m := range o.staying() {
		if m.NodeReady {
			status.Replicas++
			if version == "" {
				version = m.NodeVersion
			}
		}
	}
	if version != "" {
		status.Version = version
	}
	if o.Cache != "" {
		status.Platform = &hyperv1.NodePoolPlatformStatus{KubeVirt: &hyperv1.KubeVirtNodePoolStatus{CacheName: o.Cache}}
	}
}

func setCondition(conds *[]hyperv1.NodePoolCondition, c hyperv1.NodePoolCondition) {
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	*conds = append(*conds, c)
}
