// Package importdisk is the step of the import-disk task: it imports a
// disk image from an HTTP(S) URL or a containerDisk registry image into the
// volume bound to the task's data workspace, as a sparse raw disk.img (the
// CDI layout), through the images library.
package importdisk
