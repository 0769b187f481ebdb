// Package vmi turns each VirtualMachineInstance into its launcher Pod, as
// KubeVirt's virt-controller does: the Pod carries the VMI's scheduling
// constraints and resource requests (the guest's memory plus the launcher's
// overhead), mounts its volumes, and kube-scheduler places it. LauncherPod
// is the pure mapping; the reconciler that creates Pods and mirrors their
// scheduling into the VMI follows.
package vmi
