package framework

import (
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/cluster"
)

// StorageRoot is the directory of the hostpath storage's local volumes on
// every node (cluster.Cluster.StorageRoot).
var StorageRoot = (&cluster.Cluster{}).StorageRoot()

// VolumeDir is the directory of pv, a volume of the hostpath storage (its
// CSI driver's, or a hostPath volume of the provisioner before it), as its
// node sees it; "" for any other volume.
func VolumeDir(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path
	case pv.Spec.CSI == nil || pv.Spec.CSI.Driver != hoststorage.DriverName:
		return ""
	}
	h := pv.Spec.CSI.VolumeHandle
	if name, ok := strings.CutPrefix(h, hoststorage.SharedPrefix); ok {
		return filepath.Join(cluster.SharedRoot, name)
	}
	rest, _ := strings.CutPrefix(h, hoststorage.LocalPrefix)
	_, name, _ := strings.Cut(rest, "/")
	return filepath.Join(StorageRoot, name)
}

// VolumeHostDir is where this machine holds VolumeDir(pv) of the node pv
// is pinned to.
func VolumeHostDir(pv *corev1.PersistentVolume) string {
	return HostPath(hostpath.VolumeNode(pv), VolumeDir(pv))
}
