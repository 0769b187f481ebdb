// Package modifytemplate is the step of the modify-vm-template task: it
// changes a template's labels, annotations and parameters and its
// VirtualMachine's CPU, memory, metadata, disks, volumes and DataVolume
// templates, or deletes the template.
package modifytemplate
