// Package vmsnapshot serves KubeVirt's snapshot.kubevirt.io/v1beta1 API:
// VirtualMachineSnapshots, their VirtualMachineSnapshotContents and
// VirtualMachineRestores, as KubeVirt's snapshot controllers do.
//
// A snapshot locks its VM (status.snapshotInProgress), records the VM and
// the claims of its persistent volumes in a content
// (vmsnapshot-content-<snapshot UID>), and takes one CSI VolumeSnapshot per
// claim whose storage class has a VolumeSnapshotClass
// (vmsnapshot-<snapshot UID>-volume-<volume>; other volumes are listed as
// excluded). A running VM with its guest agent connected has its file
// systems frozen while the volume snapshots are cut and thawed once they
// are, with the freeze bounded by the snapshot's failure deadline so that a
// lost controller never leaves a guest frozen; without an agent the
// snapshot is crash-consistent and says so in its indications. The
// content's status mirrors its VolumeSnapshots; the snapshot's mirrors the
// content. The snapshot reconciler keeps both, so contents have no
// reconciler of their own; users may only read them, as a restore trusts
// what a content records.
//
// A restore locks its target VM (status.restoreInProgress; the VM
// controller starts no VMI meanwhile), waits for it to be stopped as its
// targetReadinessPolicy says, makes a claim from every volume snapshot (a
// DataVolume with source.snapshot for a DataVolume volume, a claim with the
// VolumeSnapshot as its dataSource otherwise), and writes the content's VM
// spec into the target with its volumes renamed to the new claims - or
// creates the target (stopped, as KubeVirt does) when it is a new VM. A new
// VM carries the restore's requester (controllers/requester), never the
// snapshotted VM's, so that whatever it clones is authorized as the user
// who asked for the restore.
package vmsnapshot
