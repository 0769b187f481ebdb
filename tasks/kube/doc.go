// Package kube connects task steps to the cluster they run in, with the
// Kubernetes and KubeVirt types registered.
package kube
