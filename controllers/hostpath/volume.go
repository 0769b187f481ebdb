package hostpath

import (
	"fmt"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Provisioner is the provisioner name StorageClasses refer to.
const Provisioner = "tekvirt.io/hostpath"

// Annotations the provisioner reads and writes.
const (
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annBetaProvisioner    = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnSelectedNode is set by kube-scheduler on a WaitForFirstConsumer
	// claim: the node of its first Pod.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnProvisionOnNode names the node of an Immediate claim's volume, as
	// the hostpath provisioner's annotation of the same name does. A
	// DataVolume passes it on to its claim.
	AnnProvisionOnNode = "kubevirt.io/provisionOnNode"
)

// claimNode is the node pvc's volume must be on, "" when any will do.
func claimNode(pvc *corev1.PersistentVolumeClaim) string {
	if n := pvc.Annotations[AnnSelectedNode]; n != "" {
		return n
	}
	return pvc.Annotations[AnnProvisionOnNode]
}

// VolumeNode is the node a local volume is pinned to (by hostname), "" if
// it is not pinned to one.
func VolumeNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

// wantsVolume reports whether pvc waits for a volume from this provisioner.
func wantsVolume(pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
		return false
	}
	a := pvc.Annotations
	return a[annStorageProvisioner] == Provisioner || a[annBetaProvisioner] == Provisioner
}

// volumeName is the PV name for a claim, stable so a retry finds its PV.
func volumeName(pvc *corev1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// volumeFor builds the PersistentVolume for pvc of class, stored in a
// directory under root and pinned to node; a shared class's volume (node
// "") is pinned to none.
func volumeFor(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, root, node string) (*corev1.PersistentVolume, error) {
	if node != "" && slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		return nil, fmt.Errorf("claim %s/%s asks for ReadWriteMany; volumes of class %s live on one node: use a class with parameter %s: \"true\" (tekvirt-shared)", pvc.Namespace, pvc.Name, class.Name, ParamShared)
	}
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return nil, fmt.Errorf("claim %s/%s asks for volumeMode Block; %s provides Filesystem volumes only", pvc.Namespace, pvc.Name, Provisioner)
	}
	if pvc.Spec.Selector != nil {
		return nil, fmt.Errorf("claim %s/%s has a selector; %s cannot provision for selectors", pvc.Namespace, pvc.Name, Provisioner)
	}
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil, fmt.Errorf("claim %s/%s requests no storage size", pvc.Namespace, pvc.Name)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	dirType := corev1.HostPathDirectory
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeName(pvc),
			Annotations: map[string]string{annProvisionedBy: Provisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    &fs,
			MountOptions:                  class.MountOptions,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(root, volumeName(pvc)), Type: &dirType},
			},
		},
	}
	if node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
			}}}},
		}}
	}
	return pv, nil
}

// releasedForDeletion reports whether pv is ours, released and to be deleted.
func releasedForDeletion(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[annProvisionedBy] == Provisioner &&
		pv.Status.Phase == corev1.VolumeReleased &&
		pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete &&
		pv.DeletionTimestamp == nil
}
