// Package vmi turns each VirtualMachineInstance into its launcher Pod, as
// KubeVirt's virt-controller does: the Pod carries the VMI's scheduling
// constraints and resource requests (the guest's memory plus the launcher's
// overhead), mounts its volumes, and kube-scheduler places it. LauncherPod
// is that mapping and SchedulingOf reads the VMI's placement back from the
// Pod (Scheduling, Scheduled with its node, the scheduler's message, or a
// Pod that ended); the reconciler that creates Pods and patches VMIs with
// them follows.
package vmi
