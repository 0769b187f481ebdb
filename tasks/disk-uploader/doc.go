// Package diskuploader is the step of the disk-uploader task: it pushes the
// disk of a stopped VM's volume, or of a claim no running VM uses, to a
// registry as a containerDisk image (kubevirt-tekton-tasks' disk-uploader,
// reading the mounted claim where upstream reads a VirtualMachineExport).
package diskuploader
