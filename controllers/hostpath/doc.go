// Package hostpath is the local cluster's dynamic volume provisioner (the
// role of the hostpath provisioner in the seed): for every claim of its
// StorageClass it makes a directory under a root on the node and a
// PersistentVolume pinned to that node; when a released volume's policy is
// Delete it removes both. It runs on the node, as root, beside the kubelet.
package hostpath
