// Package hoststorage names what the hostpath storage's CSI driver shares
// with the rest of tekvirt: the driver's name (its StorageClasses'
// provisioner), the topology key pinning a local volume to its node, and
// the StorageClass parameter asking for shared volumes.
package hoststorage
