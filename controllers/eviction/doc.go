// Package eviction applies a VMI's evictionStrategy (its own, else the
// HyperConverged's cluster-wide default) to evictions of its launcher Pod,
// as KubeVirt's pod eviction webhook, evacuation controller and disruption
// budget controller do:
//
//   - None: the eviction goes through (the VMI stops; its VM starts it
//     again as its runStrategy says);
//   - LiveMigrate, LiveMigrateIfPossible, for a VMI that can live-migrate:
//     the eviction is refused (429) and the VMI marked for evacuation
//     (status.evacuationNodeName); the EvacuationReconciler migrates it
//     off the node, and the Pod it leaves behind has completed, so a drain
//     that tries again finishes;
//   - LiveMigrate for a VMI that cannot migrate: refused, saying so;
//     LiveMigrateIfPossible: the eviction goes through;
//   - External: refused and marked, for the controller that owns the
//     workload (a NodePool's) to act on.
//
// The webhook ignores failures (evictions must not hang on it), so for the
// strategies that refuse a PodDisruptionBudget protects the launcher Pod
// too.
package eviction
