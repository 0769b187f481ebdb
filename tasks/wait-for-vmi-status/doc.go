// Package waitforvmi is the step of the wait-for-vmi-status task: it
// watches a VirtualMachineInstance until a success or failure condition,
// written as a label selector over the object's fields (e.g.
// "status.phase in (Failed, Unknown)"), holds.
package waitforvmi
