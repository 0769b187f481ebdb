// Package hostedclusteraccess is the step of the hosted-cluster-access task:
// the Secrets a hosted cluster's users read, in the HostedCluster's
// namespace and named as HyperShift names them: "<name>-admin-kubeconfig"
// (key kubeconfig: system:admin's client certificate, the API server's
// published address) and "<name>-kubeadmin-password" (key password: the
// bearer token of user kubeadmin, a cluster-admin, since Kubernetes has no
// password login).
package hostedclusteraccess
