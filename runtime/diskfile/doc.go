// Package diskfile opens the disk image of a volume whose directory a
// tenant can write (a PVC's): without following a symlink at any step,
// never outside the directory, and only if what is there is a regular file
// with no other name or a block device. Anything else (a link to
// /etc/shadow or to another tenant's disk) is refused before QEMU could be
// given it.
package diskfile
