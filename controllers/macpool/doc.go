// Package macpool is the MAC pool (kubemacpool's role, served from the
// controller's mutating webhook): when the NetworkAddonsConfig "cluster"
// turns kubeMacPool on, every interface of a VirtualMachine's template
// that names no MAC gets one from its range at admission, stored in the
// VirtualMachine; a MAC another VirtualMachine has is refused. What is in
// use is read from the VirtualMachines themselves, so deleting one frees
// its MACs.
package macpool
