// Package images imports disk images: it reads a source (HTTP with resumable
// retries, an OCI containerDisk, an upload stream, a local file), verifies
// its checksum, decompresses it (gz, xz, zst; multi-block xz as written by
// multi-threaded xz is decoded block-parallel on every core) and converts it
// (qcow2 and the formats go-qcow2reader reads in pure Go, others with
// qemu-img) into a sparse raw disk.img, reporting progress, in bounded
// memory. A failed import never touches an existing disk: it writes beside
// it and renames on success. PushContainerDisk goes the other way: a disk
// file to a registry as a containerDisk image, streamed. It knows nothing of
// Kubernetes (a guard test keeps it so).
package images
