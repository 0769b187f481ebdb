// Package e2e holds tekvirt's end-to-end scenarios. They run against the
// local cluster `tekvirt up` brings up (real apiserver, kubelet, containerd,
// Tekton and the tekvirt controller); subpackages hold the bring-up, the
// registry, the image builder and the test framework.
//
// # Parallel
//
// Scenarios run one after the other, except those that mostly wait on
// their own VMs, Pods and pipelines (the pipelines, the imports and clones,
// the VM lifecycle and subresource scenarios, the template tasks, the
// catalog through the resolvers, the attacks from a tenant's launcher Pod,
// the docs' examples, and under `make e2e-hosted` the hosted clusters and
// the samples): they call t.Parallel, so Go runs them after all others,
// `make e2e` three at a time (E2E_PARALLEL), to keep CI within its budget.
// Such a scenario must work in its own namespaces or names only, must not
// restart or reconfigure anything shared (components, the HyperConverged,
// nodes) and must not depend on the nodes' free resources; the scenarios
// that do stay serial.
package e2e
