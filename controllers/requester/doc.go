// Package requester records, on the objects that can clone a disk
// (DataVolumes, and VirtualMachines through their dataVolumeTemplates), the
// user who asked for the clone, so that the clone is checked against that
// user's rights when it happens and not only when the object was admitted:
// a DataSource re-pointed after admission, or a DataVolume created by the
// controller from a VM's template, is cloned only if the recorded user may
// create datavolumes/source in the source's namespace, as CDI requires.
//
// The record is an annotation that a mutating webhook (Recorder) writes on
// every create and keeps on every update, so no user can forge it; only the
// controller itself may hand one on (from a VM to the DataVolumes of its
// templates).
package requester
