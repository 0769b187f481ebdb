// Package hostpathcsi is tekvirt's hostpath storage as a CSI driver: the
// role of the seed's hostpath provisioner (HPP), whose volumes are
// directories on a node. Kubernetes' own sidecars talk to it: the
// external-provisioner and the external-snapshotter run beside it on every
// node (their node deployment), so CreateVolume and CreateSnapshot are
// served by the node that holds the data, and the kubelet calls its node
// service directly (registered through the kubelet's plugin registration;
// attachRequired is false, so there is no attacher).
//
// A volume is a directory named after the volume under the node's root,
// pinned to the node by its topology (TopologyKey), or under the shared
// root (a file system every node mounts) for a class with the parameter
// shared "true", open to every node with the shared root (its topology
// hoststorage.SharedTopologyKey "true"). A snapshot is a copy of the
// volume's tree under .snapshots of the same root, sharing blocks with it
// where the file system can (XFS or btrfs reflink) and sparse otherwise; a
// volume restored from a snapshot or cloned from a volume is made the same
// way. The volume's files are the tenant's: nothing here follows a link
// in them, and a copy skips what is neither a directory, a regular file
// nor a link.
package hostpathcsi
