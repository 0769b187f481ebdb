// Package createvm is the step of the create-vm-from-manifest task: it
// creates a KubeVirt VirtualMachine from a manifest, strictly decoded so
// that a misspelt or unknown field is named instead of dropped.
package createvm
