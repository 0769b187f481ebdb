// Package vmwebhook is the validating admission webhook for KubeVirt
// VirtualMachines and VirtualMachineInstances: the CRD schemas accept the
// whole upstream API, and this webhook rejects every field the tekvirt
// runtime does not implement, naming it, so that nothing is silently ignored.
package vmwebhook
