// Package hostedcp is what the hosted-cluster provisioning tasks share:
// reading the control plane's PKI Secret, applying objects idempotently
// (server-side apply under each task's field owner), Service addresses,
// kubeconfigs and waiting with progress. Each task stays usable alone; this
// package holds no task's logic.
package hostedcp
