// Package launcher runs one VirtualMachineInstance as a transient libvirt
// domain (QEMU; TCG unless KVM is asked for) and reports how it ended. A
// transient domain leaves nothing behind in libvirt once it stops.
package launcher
