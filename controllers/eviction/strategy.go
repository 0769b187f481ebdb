package eviction

import (
	"fmt"

	v1 "kubevirt.io/api/core/v1"
)

// Effective is the strategy that applies to vmi: its own, else the
// cluster's default, else None.
func Effective(vmi *v1.VirtualMachineInstance, clusterDefault *v1.EvictionStrategy) v1.EvictionStrategy {
	switch {
	case vmi.Spec.EvictionStrategy != nil:
		return *vmi.Spec.EvictionStrategy
	case clusterDefault != nil:
		return *clusterDefault
	default:
		return v1.EvictionStrategyNone
	}
}

// Decision is what happens to an eviction of a VMI's launcher Pod.
type Decision struct {
	// Allow lets the eviction through.
	Allow bool
	// Evacuate marks the VMI for evacuation from the Pod's node.
	Evacuate bool
	// Message says why it was refused.
	Message string
}

// Decide applies strategy to an eviction of the launcher Pod of VMI
// namespace/name, already marked for evacuation when marked.
func Decide(strategy v1.EvictionStrategy, namespace, name string, marked bool) Decision {
	key := namespace + "/" + name
	switch strategy {
	case v1.EvictionStrategyExternal:
		if marked {
			return Decision{Message: fmt.Sprintf("Evacuation in progress: VMI %q is marked for evacuation", key)}
		}
		return Decision{Evacuate: true, Message: fmt.Sprintf("Eviction triggered evacuation of VMI %q", key)}
	case v1.EvictionStrategyLiveMigrate:
		return Decision{Message: fmt.Sprintf("VMI %q has evictionStrategy LiveMigrate but is not live-migratable (tekvirt does not migrate VMs)", key)}
	default:
		return Decision{Allow: true}
	}
}

// NeedsBudget reports whether strategy protects the launcher Pod with a
// PodDisruptionBudget, for when the webhook cannot answer.
func NeedsBudget(strategy v1.EvictionStrategy) bool {
	return strategy == v1.EvictionStrategyExternal || strategy == v1.EvictionStrategyLiveMigrate
}
