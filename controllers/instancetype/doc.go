// Package instancetype expands a VirtualMachine's instancetype and
// preference (instancetype.kubevirt.io/v1beta1) into its VMI spec as
// KubeVirt does: the instancetype's CPU and memory (and node selector,
// scheduler, host devices) are the VM's, and a VM that sets them too is
// refused naming each conflicting field; a preference fills in only what
// the VM leaves unset, and its requirements are checked. Fields of either
// kind that tekvirt does not implement are refused by name, never
// dropped.
package instancetype
