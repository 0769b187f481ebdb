// Package migration drives each VirtualMachineInstanceMigration, as
// KubeVirt's migration controller: it checks that the VMI can move
// (LiveMigratable) and that the cluster's limits allow one more migration,
// creates the target launcher Pod (the VMI's requests and constraints, the
// migration's addedNodeSelector, never the source's node) and, once
// kube-scheduler has placed it, hands the VMI to the two nodes' handlers
// through status.migrationState: the target handler prepares the Pod and
// says where it listens, the source handler runs the migration and says
// how it ended. The migration's phase follows (Next, a pure function);
// deleting a migration that has not ended aborts it. As KubeVirt's, it
// deletes the migrations of a VMI that is gone and keeps a VMI's newest
// FinalizedKept ended ones.
package migration
