package nodepool

import (
	"sort"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
)

// Machine is what the controller knows of one worker.
type Machine struct {
	Name    string
	Created time.Time
	// Removing: chosen to go (its node being drained, or its VM deleted).
	Removing bool
	// VMReady: the VM's VMI runs and is ready. NodeReady: its hosted node
	// exists and is Ready.
	VMReady, NodeReady bool
	// Unschedulable is the scheduler's message while the VM's launcher
	// Pod finds no node (e.g. none advertises its host devices).
	Unschedulable string
	// NodeVersion is the node's kubelet version, when it has joined.
	NodeVersion string
	// Evacuate: its infrastructure node is being drained (the VMI's
	// evacuationNodeName, evictionStrategy External); it is replaced.
	Evacuate bool
}

// Evacuating are the workers to replace because their infrastructure node
// is drained, and not yet being removed.
func Evacuating(machines []Machine) []string {
	var out []string
	for _, m := range machines {
		if m.Evacuate && !m.Removing {
			out = append(out, m.Name)
		}
	}
	return out
}

// Desired is how many workers np wants: spec.replicas, or within the
// autoscaling range the current count held to it.
func Desired(np *hyperv1.NodePool, current int) int {
	if a := np.Spec.AutoScaling; a != nil {
		return min(max(current, int(a.Min)), int(a.Max))
	}
	if np.Spec.Replicas != nil {
		return int(*np.Spec.Replicas)
	}
	return 0
}

// Plan says how many workers to add and which to remove so that desired
// stay: those already removing do not count; the ones to go are the least
// useful first (no Ready node, then no ready VM, then the newest).
func Plan(desired int, machines []Machine) (add int, remove []string) {
	var staying []Machine
	for _, m := range machines {
		if !m.Removing {
			staying = append(staying, m)
		}
	}
	if len(staying) <= desired {
		return desired - len(staying), nil
	}
	sort.SliceStable(staying, func(i, j int) bool {
		a, b := staying[i], staying[j]
		if a.NodeReady != b.NodeReady {
			return !a.NodeReady
		}
		if a.VMReady != b.VMReady {
			return !a.VMReady
		}
		if !a.Created.Equal(b.Created) {
			return a.Created.After(b.Created)
		}
		return a.Name > b.Name
	})
	for _, m := range staying[:len(staying)-desired] {
		remove = append(remove, m.Name)
	}
	return 0, remove
}
