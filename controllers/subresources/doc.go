// Package subresources serves KubeVirt's subresources.kubevirt.io/v1 API
// (virt-api's) as an aggregated API behind the kube-apiserver, so that
// virtctl and clients written for KubeVirt work unchanged: discovery,
// version and healthz, and the VM state changes start, stop and restart,
// applied as KubeVirt applies them (the VM's runStrategy, or
// status.stateChangeRequests that the VM controller carries out).
//
// The kube-apiserver authenticates and authorizes every request and
// proxies it with its front proxy's certificate (package frontproxy); this
// server authorizes it again with a SubjectAccessReview of the
// subresource, as virt-api does, so that only what KubeVirt's RBAC names
// (update on virtualmachines/start, ...) is ever acted on.
package subresources
