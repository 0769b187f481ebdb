// Package handler is the node daemon of the VM runtime: it watches the
// VirtualMachineInstances placed on its node, prepares their volumes
// (containerDisk overlays, PVC disks opened with runtime/diskfile,
// cloud-init seeds), starts one
// tekvirt-launcher process per VMI, and mirrors what the launcher reports
// into the VMI's status. All state lives in one directory per VMI on the
// node, so a restarted handler re-adopts running launchers without touching
// their VMs. It also serves guest-agent exec over HTTPS for execute-in-vm,
// authorized like any Kubernetes subresource, to tokens for its audience.
// For a VMI whose launcher runs in a launcher Pod (annotation
// tekvirt.io/launcher-pod) it prepares the VM's files in the Pod's own
// volumes, which it finds on the node by the Pod's UID and reaches only
// through runtime/podvolume (their tenant can write them too), writes the
// spec the waiting launcher starts from, mounts the VM's cached images
// read-only into the Pod, and stops the launcher through its socket; its
// own directory keeps a copy of the spec and the images the VM uses.
package handler
