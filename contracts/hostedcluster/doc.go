// Package hostedcluster names what a hosted control plane is made of, so
// that the catalog's provisioning tasks (which make it) and the
// HostedCluster controller (which runs them and reports on them) agree
// without importing each other: the control-plane namespace, its Secrets
// and their keys, its Services and ports, and the access Secrets in the
// HostedCluster's namespace.
package hostedcluster
