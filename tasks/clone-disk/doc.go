// Package clonedisk is the step of the clone-disk task: it copies the
// disk.img of the source workspace's volume to the target's, sharing blocks
// (reflink) where the filesystem can and as a sparse copy where not.
package clonedisk
