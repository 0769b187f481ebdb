// Package vmisubset is the part of the VirtualMachineInstance spec tekvirt
// implements, as one list of field paths: the VM webhook rejects anything
// else by name, and runtime/domain checks the same list before it builds a
// domain, so a VMI that reached a node some other way fails naming the
// field instead of running without it.
package vmisubset
