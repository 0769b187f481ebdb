// Package hotplug carries KubeVirt's hotplug volumes from request to node:
// the add and remove requests of the addvolume and removevolume
// subresources applied to a VMI's (or a VM template's) spec as KubeVirt
// applies them (Apply, Check), and the attachment Pods that make a
// hotplugged claim available on the node of the running VMI, one Pod per
// volume, with the controller's part of the VMI's status.volumeStatus
// (Pending, Bound, AttachedToNode; Detaching). The node's handler takes a
// volume on from there: it opens the disk in the attachment Pod's volume
// and hands it to the running domain (MountedToPod, Ready), and takes it
// back out when the volume leaves the spec.
//
// One attachment Pod per volume, where KubeVirt's holds all of a VMI's:
// adding or removing one volume then never replaces the Pod that holds
// the others, so a disk in use is never left without a Pod that mounts it.
package hotplug
