// Package vmdefaults writes into VirtualMachineInstances, and into the
// templates of VirtualMachines, the defaults KubeVirt's admission writes,
// so that a manifest that leaves them out (as `virtctl create vm` prints
// it) runs as it does on KubeVirt and tools reading the stored spec (a
// pod network in spec.networks, a disk for every volume) find them:
//
//   - spec.architecture amd64 and spec.domain.machine.type pc (the one
//     machine the runtime implements);
//   - a disk for every volume that has neither a disk nor a filesystem, a
//     disk target for every disk without a device, the SATA bus for
//     disks and CD-ROMs that name none (KubeVirt's amd64 default), CD-ROMs
//     read-only with a closed tray;
//   - the pod network with the masquerade binding (interface and network
//     "default") when the VMI declares neither and autoattachPodInterface
//     is not false;
//   - memory.guest from the memory request (or limit), and the memory
//     request from memory.guest; the CPU request from its limit; sockets
//     from the CPU limit (or request) when no topology is given, cores and
//     threads 1;
//   - the firmware UUID: for a VM, stable and derived from its name as
//     KubeVirt derives it; for a VMI of its own, a random one.
//
// KubeVirt also writes a CPU model (host-model), an empty features block
// and a containerDisk's imagePullPolicy; tekvirt's runtime implements no
// CPU model and no features, and resolves a containerDisk's image on every
// start whatever its policy, so none of these is written.
//
// A VirtualMachine naming an instancetype or a preference gets only its
// firmware UUID in its template: the instancetype and preference fill
// their fields first when the VM controller expands the VMI, and the VMI
// then gets the rest at its own admission, as in KubeVirt. Matchers that
// infer from a volume (inferFromVolume) are resolved at admission from the
// default labels of the PVC, DataVolume or DataSource behind it (Infer),
// reading another namespace's objects only for a requester who may clone
// from there. The Defaulter serves in the same webhook call as the
// requester record (controllers/requester).
package vmdefaults
