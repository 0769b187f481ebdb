// Package workloadupdate moves running VMIs onto the current launcher, as
// KubeVirt's workload updater: a VMI whose launcher Pod runs another
// image than the one the controller now starts launchers with is
// outdated (labelled kubevirt.io/outdatedLauncherImage); by the
// HyperConverged's workloadUpdateStrategy, an outdated VMI that can
// migrate is live-migrated to a new launcher Pod (LiveMigrate, within the
// cluster's migration limit), and one that cannot, or every one when only
// Evict is listed, has its launcher Pod evicted in batches (Evict,
// batchEvictionSize every batchEvictionInterval). Nothing moves before the
// release is rolled out on every node (RolledOut), as KubeVirt's updater
// waits for KubeVirt to be deployed. What to do is Decide's, a pure
// function.
package workloadupdate
