// Package hostedclusterbootstrap is the step of the hosted-cluster-bootstrap
// task: what a NodePool's workers need to join a hosted cluster. In the
// hosted cluster, a node bootstrap token and the bindings kubeadm makes for
// it (bootstrappers may ask for a node client certificate, the controller
// manager approves it, nodes may renew theirs); in the control-plane
// namespace, Secret worker-bootstrap with the token and the worker's
// cloud-init user-data.
package hostedclusterbootstrap
