// Package hostedservices publishes a hosted cluster's ways in through its
// control-plane namespace of the infrastructure cluster, as HyperShift's
// KubeVirt platform does: each hosted Service of type LoadBalancer gets an
// infrastructure Service (the role of the KubeVirt cloud provider), and the
// hosted cluster's default ingress (its router's NodePort Service) gets the
// selector-less Service default-ingress-passthrough-service-<generateID>
// (the role of the hosted cluster config operator). Both are selector-less:
// their EndpointSlices name the workers' addresses (their launcher Pods',
// read from the VMIs, never from the hosted Nodes, which the hosted
// cluster's admin can write) and the hosted node ports.
//
// The hosted cluster's Services and Nodes are watched through informers of
// its API server, one set per HostedCluster, started and stopped with it.
// What each object should be is computed by pure functions (publish.go,
// workers.go), table-tested apart from the reconciler.
package hostedservices
