// Package hostedclusteretcd is the step of the hosted-cluster-etcd task: a
// hosted control plane's etcd as a StatefulSet with one PVC per member, its
// client Service and one Service per member (whose ClusterIP is the
// member's address: nothing here needs cluster DNS), mutual TLS for clients
// and peers with certificates issued by the etcd CA for those addresses
// (members dial each other with an address-less peer client certificate),
// preferably spread over the nodes. It waits until every member is ready.
package hostedclusteretcd
