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
// namespace/name, already marked for evacuation when marked, which can
// live-migrate when migratable: as KubeVirt's, External and the
// LiveMigrate strategies of a VMI that can move refuse the eviction and
// mark the VMI, whose owner (External) or migration (the others) takes it
// off the node; LiveMigrate refuses for a VMI that cannot move, and
// LiveMigrateIfPossible lets its Pod go.
func Decide(strategy v1.EvictionStrategy, namespace, name string, marked, migratable bool) Decision {
	key := namespace + "/" + name
	switch {
	case strategy == v1.EvictionStrategyLiveMigrate && !migratable:
		return Decision{Message: fmt.Sprintf("VMI %q has evictionStrategy LiveMigrate but is not live-migratable (its LiveMigratable condition says why)", key)}
	case strategy == v1.EvictionStrategyExternal, evacuates(strategy, migratable):
		if marked {
			return Decision{Message: fmt.Sprintf("Evacuation in progress: VMI %q is marked for evacuation", key)}
		}
		return Decision{Evacuate: true, Message: fmt.Sprintf("Eviction triggered evacuation of VMI %q", key)}
	default:
		return Decision{Allow: true}
	}
}

// evacuates reports whether the VMI leaves a node it is evicted from by
// live migration.
func evacuates(strategy v1.EvictionStrategy, migratable bool) bool {
	return migratable && (strategy == v1.EvictionStrategyLiveMigrate || strategy == v1.EvictionStrategyLiveMigrateIfPossible)
}

// NeedsBudget reports whether the launcher Pod of a VMI with strategy
// (that can live-migrate when migratable) is protected by a
// PodDisruptionBudget, for when the webhook cannot answer: whenever
// Decide refuses its eviction.
func NeedsBudget(strategy v1.EvictionStrategy, migratable bool) bool {
	return strategy == v1.EvictionStrategyExternal || strategy == v1.EvictionStrategyLiveMigrate || evacuates(strategy, migratable)
}
