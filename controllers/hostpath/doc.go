// Package hostpath holds the hostpath storage's rules that the rest of
// tekvirt and its CSI driver (runtime/hostpathcsi) share: which classes and
// volumes are shared by every node (and whether a node may make one), which
// node a volume is pinned to, and where a new claim's volume may go. It
// also keeps the volumes the provisioner before the CSI driver made
// (hostPath PersistentVolumes, provisioner Provisioner) working: their
// directories are deleted with them once released.
package hostpath
