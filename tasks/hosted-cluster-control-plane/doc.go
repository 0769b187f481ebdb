// Package hostedclustercontrolplane is the step of the
// hosted-cluster-control-plane task: kube-apiserver, kube-controller-manager
// and kube-scheduler of a hosted cluster as Deployments in its control-plane
// namespace, from the release image's binaries. It makes the API server's
// Service first, issues its serving certificate for the addresses the
// Service got, writes the components' kubeconfigs (addressing the Service's
// ClusterIP) and the token file that makes the kubeadmin password a
// cluster-admin bearer token. Pods roll when any of these change.
package hostedclustercontrolplane
