// Package eviction applies a VMI's evictionStrategy (its own, else the
// HyperConverged's cluster-wide default) to evictions of its launcher Pod,
// as KubeVirt's pod eviction webhook and disruption budget controller do,
// for a runtime where no VMI is live-migratable:
//
//   - None, LiveMigrateIfPossible: the eviction goes through (the VMI stops;
//     its VM starts it again as its runStrategy says);
//   - External: the eviction is refused (429) and the VMI marked for
//     evacuation (status.evacuationNodeName), for the controller that owns
//     the workload (a NodePool's) to act on;
//   - LiveMigrate: the eviction is refused, the VMI not being migratable.
//
// The webhook ignores failures (evictions must not hang on it), so for the
// strategies that refuse a PodDisruptionBudget protects the launcher Pod
// too.
package eviction
