// Package containerdisk fetches KubeVirt containerDisk images with
// go-containerregistry: the disk file under /disk/ (and, for kernel boot,
// the kernel and initrd paths) is extracted once per image digest into a
// node cache (capped per image, collected when no VM has used an image for a
// while), and each VM gets a copy-on-write qcow2 overlay on top of it; a
// qcow2 that names another file is refused before anything opens it.
package containerdisk
