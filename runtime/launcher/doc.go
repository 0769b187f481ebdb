// Package launcher runs one VirtualMachineInstance as a transient libvirt
// domain (QEMU; TCG unless KVM is asked for) and reports how it ended. A
// transient domain leaves nothing behind in libvirt once it stops.
//
// In a launcher Pod it starts a libvirtd of its own (Libvirtd), so QEMU
// runs in the Pod's cgroup and network namespace, and, being the Pod's
// PID 1, it stays as an init that reaps orphans (RunAsInit).
package launcher
