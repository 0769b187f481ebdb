// Package v1beta1 is the subset of the hco.kubevirt.io/v1beta1 HyperConverged
// API that tekvirt supports. No Go module of the upstream operator's API is
// available, so the fields are declared here with the upstream names and
// JSON tags; fields not declared are rejected by the API server's strict
// field validation, naming the field.
//
// +kubebuilder:object:generate=true
// +groupName=hco.kubevirt.io
package v1beta1
