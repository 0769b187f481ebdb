// Package v1 is the subset of CNAO's networkaddonsoperator.network.kubevirt.io/v1
// NetworkAddonsConfig API that tekvirt supports: the object the
// HyperConverged operator creates as "cluster" for the network add-ons.
// CNAO's Go module cannot be required (its served versions either fail
// their checksum or require a github.com/openshift/api version that exists
// only through its replace directives), so the fields are declared here
// with the upstream names and JSON tags; fields not declared are refused
// by the API server's strict field validation, naming the field.
//
// +kubebuilder:object:generate=true
// +groupName=networkaddonsoperator.network.kubevirt.io
package v1
