// Package launcher runs one VirtualMachineInstance in its launcher Pod as a
// transient libvirt domain (QEMU; TCG unless KVM is asked for) and reports
// how it ended. It waits for the spec the node's handler writes into the
// Pod's volume, starts a libvirtd of its own there (Libvirtd; a session
// daemon, run unprivileged as the Pod's user), so QEMU runs in the Pod's
// cgroup and network namespace, and, being the Pod's PID 1,
// stays as an init that reaps orphans (RunAsInit). Before its libvirtd
// starts it installs the node's QEMU capabilities (ProbeQEMU makes them once
// per node). Over its socket it serves status, stats, exec, shutdown and
// the VMI operations of KubeVirt's subresources (guest agent reads, pause,
// soft reboot, filesystem freeze) and port-forward streams to guest ports.
package launcher
