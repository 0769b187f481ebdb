// Package hostedclusterpki is the step of the hosted-cluster-pki task: the
// identities of a hosted control plane in its namespace. It makes (or keeps,
// when still valid) the cluster CA, the etcd CA, the service-account signing
// key, one client certificate per component and the kubeadmin password.
// Serving certificates are not made here: the tasks that create the
// Services issue them for the addresses the Services got.
package hostedclusterpki
