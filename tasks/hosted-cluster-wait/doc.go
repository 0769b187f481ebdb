// Package hostedclusterwait is the step of the hosted-cluster-wait task: it
// waits until a hosted control plane serves. Every control-plane Deployment
// is available, the API server answers /readyz to system:admin's
// certificate, and the kubeadmin password authenticates as kubeadmin. Its
// result is the cluster's version as the API server reports it.
package hostedclusterwait
