// Package vmfromtemplate is the step of the create-vm-from-template task:
// it processes an OpenShift Template with OpenShift's rules and creates
// the one VirtualMachine it makes, labelled with the template it came
// from (so the template validator applies its rules).
package vmfromtemplate
