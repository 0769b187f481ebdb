// Package vmcreate is what the tasks that create a VirtualMachine share
// (create-vm-from-manifest, create-vm-from-template): the params they have
// in common (namespace, runStrategy, startVM, setOwnerReference), kubevirt-
// tekton-tasks' semantics for them, and a create that a rerun of the same
// step recognises.
package vmcreate
