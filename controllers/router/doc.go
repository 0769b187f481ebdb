// Package router is a hosted cluster's default router: it serves the
// cluster's Ingresses (of its class, hc.IngressClass, or of none) over
// HTTP and HTTPS, terminating TLS with each Ingress's certificate, as
// OpenShift's default IngressController does behind its NodePort Service,
// which the infrastructure's passthrough Service forwards
// *.apps.<name>.<baseDomain> to.
//
// What a request reaches is decided by a Table, a pure function of the
// Ingresses (Kubernetes' Ingress rules: exact hosts before wildcards,
// longest path first, Exact before Prefix, the oldest Ingress first on a
// tie), rebuilt from informers on every change. Requests go to the
// backend Service's cluster address, so kube-proxy picks the endpoint.
package router
