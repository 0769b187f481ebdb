// Package handler is the node daemon of the VM runtime: it watches the
// VirtualMachineInstances placed on its node and prepares each in its
// launcher Pod: it finds the Pod's volumes on the node by the Pod's UID and
// reaches them only through runtime/podvolume (their tenant can write them
// too), writes the VM's files there (containerDisk overlays, cloud-init
// seeds; PVC disks are opened with runtime/diskfile and mounted by the
// Pod), mounts the VM's cached images read-only into the Pod, and writes
// the spec the launcher waiting there starts from. It mirrors what the
// launcher reports into the VMI's status and stops it through its socket.
// Its own directory per VMI (a copy of the spec, the images the VM uses)
// lets a restarted handler take the VMs up again without touching them. It
// also serves over HTTPS, to tokens for its audience and authorized like any
// Kubernetes subresource: guest-agent exec for execute-in-vm, and for the
// subresources API the VMI operations (guestosinfo, pause, ...) and the
// streams: serial console, VNC display, port-forward through the launcher.
// It hands each launcher Pod the node's QEMU capabilities.
//
// Live migration: as the target of a VMI's migration (its status names
// this node), it prepares the target launcher Pod as for a first start,
// with a launcher that waits for the domain, lets the migration's streams
// into that Pod (runtime/migration's server, mutual TLS between handlers)
// and takes the VMI over once the domain runs here; as the source, it
// connects the source Pod's loopback to the target node and has the
// launcher migrate, mirroring its progress and outcome into
// status.migrationState.
package handler
