package hostedcluster

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons this controller reports besides HyperShift's AsExpected and
// WaitingForAvailable.
const (
	ProvisioningReason       = "Provisioning"
	ProvisioningFailedReason = "ProvisioningFailed"
	NamespaceConflictReason  = "ControlPlaneNamespaceConflict"
	APIServerUnavailable     = "APIServerUnavailable"
)

// Run is what the status needs of the latest provisioning PipelineRun.
type Run struct {
	Name      string
	Done      bool
	Succeeded bool
	// Message is Tekton's (tasks completed, or why it failed).
	Message            string
	Version            string // the wait task's result, once succeeded
	Started, Completed metav1.Time
}

// Observed is what the reconciler found.
type Observed struct {
	// Conflict, when set, says why the control-plane namespace is not this
	// cluster's.
	Conflict string
	Run      *Run // nil until the first PipelineRun exists
	// APIServerReady: the kube-apiserver Deployment has a ready replica.
	APIServerReady bool
}

// Conditions are the Available, Progressing and Degraded conditions for o,
// as HyperShift reports them.
func Conditions(o Observed, generation int64) []metav1.Condition {
	cond := func(t hyperv1.ConditionType, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg, ObservedGeneration: generation}
	}
	av, pr, dg := hyperv1.HostedClusterAvailable, hyperv1.HostedClusterProgressing, hyperv1.HostedClusterDegraded
	switch {
	case o.Conflict != "":
		return []metav1.Condition{
			cond(av, metav1.ConditionFalse, NamespaceConflictReason, o.Conflict),
			cond(pr, metav1.ConditionFalse, NamespaceConflictReason, o.Conflict),
			cond(dg, metav1.ConditionTrue, NamespaceConflictReason, o.Conflict),
		}
	case o.Run == nil || !o.Run.Done:
		msg := "Waiting for the provisioning PipelineRun to start"
		if o.Run != nil {
			msg = fmt.Sprintf("PipelineRun %s: %s", o.Run.Name, o.Run.Message)
		}
		return []metav1.Condition{
			cond(av, metav1.ConditionFalse, hyperv1.WaitingForAvailableReason, msg),
			cond(pr, metav1.ConditionTrue, ProvisioningReason, msg),
			cond(dg, metav1.ConditionFalse, hyperv1.AsExpectedReason, ""),
		}
	case !o.Run.Succeeded:
		msg := fmt.Sprintf("PipelineRun %s failed: %s (delete it to run again)", o.Run.Name, o.Run.Message)
		return []metav1.Condition{
			cond(av, metav1.ConditionFalse, ProvisioningFailedReason, msg),
			cond(pr, metav1.ConditionFalse, ProvisioningFailedReason, msg),
			cond(dg, metav1.ConditionTrue, ProvisioningFailedReason, msg),
		}
	case !o.APIServerReady:
		msg := "The hosted kube-apiserver has no ready replica"
		return []metav1.Condition{
			cond(av, metav1.ConditionFalse, APIServerUnavailable, msg),
			cond(pr, metav1.ConditionFalse, hyperv1.AsExpectedReason, ""),
			cond(dg, metav1.ConditionTrue, APIServerUnavailable, msg),
		}
	default:
		return []metav1.Condition{
			cond(av, metav1.ConditionTrue, hyperv1.AsExpectedReason, "The hosted control plane is available"),
			cond(pr, metav1.ConditionFalse, hyperv1.AsExpectedReason, fmt.Sprintf("PipelineRun %s succeeded", o.Run.Name)),
			cond(dg, metav1.ConditionFalse, hyperv1.AsExpectedReason, ""),
		}
	}
}

// Apply sets the conditions for o on status (keeping transition times of
// unchanged ones and every other condition) and the version history.
func Apply(status *hyperv1.HostedClusterStatus, o Observed, generation int64, image string, now metav1.Time) {
	for _, c := range Conditions(o, generation) {
		c.LastTransitionTime = now
		meta.SetStatusCondition(&status.Conditions, c)
	}
	if o.Conflict != "" {
		return
	}
	if status.Version == nil {
		status.Version = &hyperv1.ClusterVersionStatus{}
	}
	v := status.Version
	v.Desired = configv1.Release{Image: image}
	v.ObservedGeneration = generation
	if v.AvailableUpdates == nil {
		v.AvailableUpdates = []configv1.Release{}
	}
	entry := configv1.UpdateHistory{State: configv1.PartialUpdate, Image: image, StartedTime: now}
	if o.Run != nil {
		entry.StartedTime = o.Run.Started
		if o.Run.Done && o.Run.Succeeded {
			entry.State, entry.Version = configv1.CompletedUpdate, o.Run.Version
			completed := o.Run.Completed
			entry.CompletionTime = &completed
		}
	}
	if len(v.History) > 0 && v.History[0].Image == image {
		if v.History[0].State == configv1.CompletedUpdate && entry.State != configv1.CompletedUpdate {
			return // a re-run of the same release keeps its completed entry
		}
		v.History[0] = entry
		return
	}
	v.History = append([]configv1.UpdateHistory{entry}, v.History...)
}
