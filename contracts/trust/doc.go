// Package trust names where tekvirt publishes the CA bundle that verifies
// its serving certificates (the upload proxy's, the node handlers' exec
// endpoints'), so that clients in any layer find it without importing the
// operator: a ConfigMap every authenticated user may read, as Kubernetes
// publishes kube-root-ca.crt.
package trust

// The bundle is key CABundleKey (PEM) of ConfigMap CABundleConfigMap in
// Namespace.
const (
	Namespace         = "tekvirt-system"
	CABundleConfigMap = "tekvirt-ca"
	CABundleKey       = "ca.crt"
)
