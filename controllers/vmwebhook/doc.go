// Package vmwebhook is the validating admission webhook for KubeVirt
// VirtualMachines and VirtualMachineInstances and CDI DataVolumes,
// DataSources and DataImportCrons: the CRD schemas accept the whole upstream
// API, and this webhook rejects every field the tekvirt runtime does not
// implement, naming it, so that nothing is silently ignored, and specs the
// runtime could not build a domain of (a disk without its volume, an
// interface without its network, no guest memory). It also keeps
// what must not change (a VMI's or DataVolume's spec) and checks the clone
// rights of the user the requester webhook recorded.
package vmwebhook
