// Package frontproxy is what tekvirt's aggregated APIs (CDI's
// upload.cdi.kubevirt.io, KubeVirt's subresources.kubevirt.io) share: the
// kube-apiserver authenticates and authorizes each request and proxies it
// with a client certificate of its front proxy and the caller in X-Remote-*
// headers. ServerTLS verifies that certificate against the CA the
// kube-apiserver publishes, Authenticated lets only such requests through
// and hands on the caller, and WriteStatus answers as the Kubernetes API
// does.
package frontproxy
