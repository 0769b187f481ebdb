package hostpath

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
)

// csiVolume is a volume of the CSI driver with handle, pinned to node
// unless node is "".
func csiVolume(handle, node string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
		CSI: &corev1.CSIPersistentVolumeSource{Driver: hoststorage.DriverName, VolumeHandle: handle}}}}
	if node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hoststorage.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
	}
	return pv
}

// TestShared: the shared classes of the CSI driver and of the provisioner
// before it are shared; their volumes are verified shared when pinned to
// no node, and no other volume is.
func TestShared(t *testing.T) {
	params := map[string]string{ParamShared: "true"}
	for _, tc := range []struct {
		class *storagev1.StorageClass
		want  bool
	}{
		{&storagev1.StorageClass{Provisioner: hoststorage.DriverName, Parameters: params}, true},
		{&storagev1.StorageClass{Provisioner: Provisioner, Parameters: params}, true},
		{&storagev1.StorageClass{Provisioner: hoststorage.DriverName}, false},
		{&storagev1.StorageClass{Provisioner: "other", Parameters: params}, false},
	} {
		if got := IsShared(tc.class); got != tc.want {
			t.Errorf("IsShared(%s %v) = %v", tc.class.Provisioner, tc.class.Parameters, got)
		}
	}
	legacy := legacyVolume("pvc-1", "/shared/pvc-1", "")
	legacy.Spec.NodeAffinity = nil
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"CSI shared volume", csiVolume("shared/pvc-1", ""), true},
		{"CSI shared volume open to the nodes with the shared root", func() *corev1.PersistentVolume {
			pv := csiVolume("shared/pvc-1", "")
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hoststorage.SharedTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}},
			}}}}
			return pv
		}(), true},
		{"CSI local volume", csiVolume("local/n1/pvc-1", "n1"), false},
		{"CSI local handle without affinity", csiVolume("local/n1/pvc-1", ""), false},
		{"legacy shared volume", legacy, true},
		{"legacy local volume", legacyVolume("pvc-2", "/root/pvc-2", "n1"), false},
		{"another driver's volume", func() *corev1.PersistentVolume {
			pv := csiVolume("shared/pvc-1", "")
			pv.Spec.CSI.Driver = "other.csi.example.com"
			return pv
		}(), false},
		{"a hostPath volume of no provisioner", func() *corev1.PersistentVolume {
			pv := legacyVolume("pvc-3", "/shared/pvc-3", "")
			pv.Spec.NodeAffinity, pv.Annotations = nil, nil
			return pv
		}(), false},
	} {
		if got := VerifiedShared(tc.pv); got != tc.want {
			t.Errorf("%s: VerifiedShared = %v", tc.name, got)
		}
	}
	if got := AccessModes(&storagev1.StorageClass{Provisioner: hoststorage.DriverName, Parameters: params}); len(got) != 1 || got[0] != corev1.ReadWriteMany {
		t.Fatalf("AccessModes(shared) = %v", got)
	}
	if got := AccessModes(nil); len(got) != 1 || got[0] != corev1.ReadWriteOnce {
		t.Fatalf("AccessModes(nil) = %v", got)
	}
}

// TestUnsharedNodes: a root shows the nodes whose storage announced
// itself there; the error names the others.
func TestUnsharedNodes(t *testing.T) {
	root := t.TempDir()
	if got, err := unsharedNodes(root, []string{"b", "a"}); err != nil || strings.Join(got, ",") != "a,b" {
		t.Fatalf("empty root: %v %v", got, err)
	}
	for _, n := range []string{"a", "c"} {
		if err := AnnounceNode(root, n); err != nil {
			t.Fatal(err)
		}
	}
	got, err := unsharedNodes(root, []string{"c", "b", "a"})
	if err != nil || strings.Join(got, ",") != "b" {
		t.Fatalf("unshared = %v %v, want b", got, err)
	}
	if msg := notSharedError(root, "a", got).Error(); !strings.Contains(msg, "node(s) b") || !strings.Contains(msg, "on node a") {
		t.Fatalf("error %q", msg)
	}
}

func TestReleasedForDeletion(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec:   corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}}
	if !releasedForDeletion(pv) {
		t.Fatal("released volume not deleted")
	}
	pv.Status.Phase = corev1.VolumeBound
	if releasedForDeletion(pv) {
		t.Fatal("bound volume deleted")
	}
	pv.Status.Phase = corev1.VolumeReleased
	pv.Annotations[annProvisionedBy] = hoststorage.DriverName
	if releasedForDeletion(pv) {
		t.Fatal("a CSI volume (the external-provisioner's to delete) deleted")
	}
}

func TestWithin(t *testing.T) {
	for path, want := range map[string]bool{"/data/pvc-1": true, "/data": false, "/data/../etc": false, "/etc": false, "/data/a/b": true} {
		if got := within("/data", path); got != want {
			t.Errorf("within(/data, %s) = %v", path, got)
		}
	}
}

func TestVolumeNode(t *testing.T) {
	pv := legacyVolume("pvc-1", "/data/pvc-1", "node-7")
	if got := VolumeNode(pv); got != "node-7" {
		t.Errorf("VolumeNode of a legacy volume = %q", got)
	}
	if got := VolumeNode(csiVolume("local/node-8/pvc-1", "node-8")); got != "node-8" {
		t.Errorf("VolumeNode of a CSI volume = %q", got)
	}
	pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Key = "topology.kubernetes.io/zone"
	if got := VolumeNode(pv); got != "" {
		t.Errorf("VolumeNode of a zone-pinned volume = %q", got)
	}
	if got := VolumeNode(&corev1.PersistentVolume{}); got != "" {
		t.Errorf("VolumeNode of an unpinned volume = %q", got)
	}
}
