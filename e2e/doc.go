// Package e2e holds tekvirt's end-to-end scenarios. They run against the
// local cluster `tekvirt up` brings up (real apiserver, kubelet, containerd,
// Tekton and the tekvirt controller); subpackages hold the bring-up, the
// registry, the image builder and the test framework.
//
// # Parallel
//
// Scenarios run one after the other, except those that mostly wait on
// Pods and pipelines (the golden-image and template-creation pipelines, the
// catalog through the resolvers and through bundles, the HTTP import, the
// DataImportCron, the disk uploader and its attack, and under `make
// e2e-hosted` the hosted
// clusters and the pipeline and hosted-cluster samples): they call
// t.Parallel, so Go runs them after all others, two at a time (-parallel
// defaults to the 2 cores), to keep CI within its budget. Such a scenario
// must work in its own namespaces or names only and must not restart or
// reconfigure anything shared.
package e2e
