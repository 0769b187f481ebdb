// Package vmi turns each VirtualMachineInstance into its launcher Pod, as
// KubeVirt's virt-controller does: the Pod carries the VMI's scheduling
// constraints and resource requests (the guest's memory plus the launcher's
// overhead), mounts its volumes, and kube-scheduler places it
// (LauncherPod). The reconciler creates the Pod and mirrors its scheduling
// into the VMI (SchedulingOf): Scheduling with the scheduler's message,
// Scheduled on its node, Failed when the Pod fails; the node's handler takes
// the VMI from Scheduled. A deleted VMI whose node is gone, with its
// launcher Pods, is released from the handler's finalizer here, as no
// handler is left to release it.
package vmi
