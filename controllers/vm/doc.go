// Package vm reconciles KubeVirt VirtualMachines: it keeps a
// VirtualMachineInstance in existence or not as the VM's run strategy says
// (Always, RerunOnFailure, Once, Halted, Manual; the deprecated running
// field mapped), and mirrors the VMI into the VM's status: printableStatus,
// created, ready and the Ready and Failure conditions. Start and stop
// requests for Manual (the subresources.kubevirt.io paths) are not served
// yet, and tekvirt-controller does not run this reconciler until the node
// runtime runs VMIs and the KubeVirt CRDs are installed.
package vm
