// Package nodepool reconciles HyperShift NodePools of platform KubeVirt:
// each replica is a tekvirt VirtualMachine in the HostedCluster's
// control-plane namespace, booting the worker image from a persistent root
// volume (imported once into a cache DataVolume and cloned per worker when
// cacheStrategy is PVC), joining the hosted cluster with the user-data of
// the hosted-cluster-bootstrap task, as a node named after the VM. Scaling
// down drains the hosted node before its VM goes. The pure parts (the VM a
// replica gets, which workers to add or remove, the status) are separate
// from the reconciler and table-tested.
package nodepool
