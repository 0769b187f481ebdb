package hostpath

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
)

// Provisioner is the name of the provisioner the hostpath storage had
// before it was a CSI driver (hoststorage.DriverName): the volumes it made
// are hostPath PersistentVolumes, which keep working, and which
// VolumeReconciler deletes once released.
const Provisioner = "tekvirt.io/hostpath"

// Annotations of claims and volumes.
const (
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// AnnSelectedNode is the node a claim's volume is made on: set by
	// kube-scheduler on a WaitForFirstConsumer claim (its first Pod's
	// node), by the CSI driver's provisioner that takes an Immediate claim
	// (its own node), or beforehand by whoever needs the volume on one.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnProvisionOnNode names the node of an Immediate claim's volume, as
	// the hostpath provisioner's annotation of the same name does. A
	// DataVolume passes it on to its claim, with AnnSelectedNode.
	AnnProvisionOnNode = "kubevirt.io/provisionOnNode"
)

// VolumeNode is the node a local volume is pinned to (by hostname, or by
// the CSI driver's topology key), "" if it is not pinned to one.
func VolumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if (e.Key == corev1.LabelHostname || e.Key == hoststorage.TopologyKey) && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// releasedForDeletion reports whether pv is ours, released and to be deleted.
func releasedForDeletion(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[annProvisionedBy] == Provisioner &&
		pv.Status.Phase == corev1.VolumeReleased &&
		pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete &&
		pv.DeletionTimestamp == nil
}
