// Package podvolume is how the node's handler touches a launcher Pod's
// volumes on the node: as directories their tenant can write too (from the
// Pod, or an ephemeral container mounting the same volume). Nothing here
// follows a link the tenant may have planted, out of the directory or onto
// another file: files are written under fresh names and renamed over
// whatever was there, read only when they are regular files beneath the
// directory, sockets reached only when the entry is a socket itself, and
// images mounted onto a directory opened without following links.
package podvolume
