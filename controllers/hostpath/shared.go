package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
)

// Shared volumes. A StorageClass of the hostpath storage with the
// parameter ParamShared "true"
// puts its volumes under the shared root, a directory that every node
// mounts from one shared file system (an NFS export, CephFS, ...). Such a
// volume is not pinned to a node and may be ReadWriteMany: a VM whose
// disks are all on it can live-migrate. Whether the root really is shared
// is checked, not trusted: every node's provisioner leaves a marker there
// (AnnounceNode), and a shared volume is made only once every node's
// marker is seen, so a root that is a plain local directory on each node
// fails with the nodes it does not share with named.

// ParamShared is the StorageClass parameter that asks for shared volumes.
const ParamShared = hoststorage.ParamShared

// markerDir is where the nodes' markers are, inside the shared root; a
// volume's directory is named pvc-<uid> and cannot clash.
const markerDir = ".nodes"

// IsShared reports whether class asks for shared volumes of the hostpath
// storage (its CSI driver, or the provisioner before it).
func IsShared(class *storagev1.StorageClass) bool {
	return (class.Provisioner == hoststorage.DriverName || class.Provisioner == Provisioner) && class.Parameters[ParamShared] == "true"
}

// AccessModes are the access modes a claim of class gets when it names
// none, as a StorageProfile's first claim property set: ReadWriteMany on
// a shared class, else ReadWriteOnce.
func AccessModes(class *storagev1.StorageClass) []corev1.PersistentVolumeAccessMode {
	if class != nil && IsShared(class) {
		return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

// annDefaultClass marks the cluster's default StorageClass.
const annDefaultClass = "storageclass.kubernetes.io/is-default-class"

// ClaimClass is the StorageClass a claim naming name gets: that one, or
// the cluster's default when name is unset; nil when there is none.
func ClaimClass(ctx context.Context, c client.Reader, name *string) (*storagev1.StorageClass, error) {
	if name != nil && *name != "" {
		class := &storagev1.StorageClass{}
		if err := c.Get(ctx, client.ObjectKey{Name: *name}, class); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return class, nil
	}
	classes := &storagev1.StorageClassList{}
	if err := c.List(ctx, classes); err != nil {
		return nil, fmt.Errorf("listing storage classes: %w", err)
	}
	for i := range classes.Items {
		if classes.Items[i].Annotations[annDefaultClass] == "true" {
			return &classes.Items[i], nil
		}
	}
	return nil, nil
}

// AnnounceNode leaves node's marker in the shared root.
func AnnounceNode(sharedRoot, node string) error {
	dir := filepath.Join(sharedRoot, markerDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, node), []byte(node+"\n"), 0o644); err != nil {
		return fmt.Errorf("leaving node %s's marker in %s: %w", node, dir, err)
	}
	return nil
}

// VerifiedShared reports whether pv is a shared volume of the hostpath
// storage: made only after every node's marker was seen in the shared
// root, so the same file on every node (PersistentVolumes are the cluster
// admin's and the provisioners': a tenant cannot make one look so).
func VerifiedShared(pv *corev1.PersistentVolume) bool {
	if csi := pv.Spec.CSI; csi != nil {
		return csi.Driver == hoststorage.DriverName && strings.HasPrefix(csi.VolumeHandle, hoststorage.SharedPrefix) && VolumeNode(pv) == ""
	}
	return pv.Annotations[annProvisionedBy] == Provisioner && pv.Spec.HostPath != nil && VolumeNode(pv) == ""
}

// CheckShared says why node cannot make a shared volume: it has no shared
// root, or its shared root does not show every node's marker.
func CheckShared(ctx context.Context, c client.Reader, sharedRoot, node string) error {
	if sharedRoot == "" {
		return fmt.Errorf("a shared volume is asked for, but the hostpath storage of node %s has no shared root (--shared-root)", node)
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	names := make([]string, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	missing, err := unsharedNodes(sharedRoot, names)
	if err != nil {
		return fmt.Errorf("reading the nodes' markers in %s: %w", sharedRoot, err)
	}
	if len(missing) > 0 {
		return notSharedError(sharedRoot, node, missing)
	}
	return nil
}

// unsharedNodes are the nodes whose markers the shared root does not show
// here, sorted.
func unsharedNodes(sharedRoot string, nodes []string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(sharedRoot, markerDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Name()] = true
	}
	var out []string
	for _, n := range nodes {
		if !seen[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// notSharedError says which nodes the shared root is not shared with.
func notSharedError(sharedRoot, node string, missing []string) error {
	return fmt.Errorf("a shared volume is asked for, but %s on node %s does not show the hostpath storage of node(s) %s: mount one shared file system at %s on every node",
		sharedRoot, node, strings.Join(missing, ", "), sharedRoot)
}

// Placement says why node should not hold the local volume of the claim
// namespace/name, nil when it may: a claim placed on another node with
// AnnProvisionOnNode (as the hostpath provisioner before the CSI driver
// honoured it) is that node's; a claim placed on this one is; any other
// is not while node is cordoned (no new Pod could use the volume there).
// A node that cannot be read is not cordoned.
func Placement(ctx context.Context, c client.Reader, node, namespace, name string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc); err != nil {
		return fmt.Errorf("reading claim %s/%s: %w", namespace, name, err)
	}
	switch on := pvc.Annotations[AnnProvisionOnNode]; on {
	case node:
		return nil
	case "":
	default:
		return fmt.Errorf("claim %s/%s asks for node %s (%s), not %s", namespace, name, on, AnnProvisionOnNode, node)
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return client.IgnoreNotFound(err)
	}
	if n.Spec.Unschedulable {
		return fmt.Errorf("node %s is cordoned: claim %s/%s goes to another node", node, namespace, name)
	}
	return nil
}
