package hostpath

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claim(mut func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk", UID: "u1",
			Annotations: map[string]string{annStorageProvisioner: Provisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if mut != nil {
		mut(pvc)
	}
	return pvc
}

func TestVolumeFor(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	block := corev1.PersistentVolumeBlock
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hp"}, Provisioner: Provisioner}
	tests := []struct {
		name    string
		pvc     *corev1.PersistentVolumeClaim
		class   *storagev1.StorageClass
		wantErr string
		check   func(t *testing.T, pv *corev1.PersistentVolume)
	}{
		{name: "filesystem claim", pvc: claim(nil), class: class, check: func(t *testing.T, pv *corev1.PersistentVolume) {
			if pv.Name != "pvc-u1" || pv.Spec.HostPath.Path != "/root/pvc-u1" {
				t.Fatalf("name %s path %s", pv.Name, pv.Spec.HostPath.Path)
			}
			if pv.Spec.ClaimRef.UID != "u1" || pv.Spec.ClaimRef.Name != "disk" || pv.Spec.StorageClassName != "hp" {
				t.Fatalf("claimRef %+v class %s", pv.Spec.ClaimRef, pv.Spec.StorageClassName)
			}
			if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
				t.Fatalf("reclaim %s", pv.Spec.PersistentVolumeReclaimPolicy)
			}
			if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "1Gi" {
				t.Fatalf("capacity %s", got.String())
			}
			if v := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values; v[0] != "node1" {
				t.Fatalf("node affinity %v", v)
			}
		}},
		{name: "class reclaim policy is kept", pvc: claim(nil), class: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hp"}, ReclaimPolicy: &retain},
			check: func(t *testing.T, pv *corev1.PersistentVolume) {
				if pv.Spec.PersistentVolumeReclaimPolicy != retain {
					t.Fatalf("reclaim %s", pv.Spec.PersistentVolumeReclaimPolicy)
				}
			}},
		{name: "ReadWriteMany on one node is refused", pvc: claim(func(p *corev1.PersistentVolumeClaim) {
			p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}), class: class, wantErr: "ReadWriteMany; volumes of class hp live on one node"},
		{name: "block is refused", pvc: claim(func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeMode = &block }), class: class, wantErr: "volumeMode Block"},
		{name: "selector is refused", pvc: claim(func(p *corev1.PersistentVolumeClaim) { p.Spec.Selector = &metav1.LabelSelector{} }), class: class, wantErr: "selector"},
		{name: "no size", pvc: claim(func(p *corev1.PersistentVolumeClaim) { p.Spec.Resources.Requests = nil }), class: class, wantErr: "no storage size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pv, err := volumeFor(tt.pvc, tt.class, "/root", "node1")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "ns/disk") {
					t.Fatalf("err = %v, want %q naming ns/disk", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, pv)
		})
	}
}

// TestSharedVolume: a shared class's volume is pinned to no node, may be
// ReadWriteMany, and lives under the root it is given.
func TestSharedVolume(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Provisioner: Provisioner, Parameters: map[string]string{ParamShared: "true"}}
	if !IsShared(class) || IsShared(&storagev1.StorageClass{Provisioner: Provisioner}) || IsShared(&storagev1.StorageClass{Provisioner: "other", Parameters: class.Parameters}) {
		t.Fatal("IsShared")
	}
	pvc := claim(func(p *corev1.PersistentVolumeClaim) {
		p.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	})
	pv, err := volumeFor(pvc, class, "/shared", "")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.NodeAffinity != nil || VolumeNode(pv) != "" || pv.Spec.HostPath.Path != "/shared/pvc-u1" || pv.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Fatalf("shared volume %+v", pv.Spec)
	}
	if !VerifiedShared(pv) {
		t.Fatal("a shared volume is not VerifiedShared")
	}
	if localPV, err := volumeFor(claim(nil), class, "/root", "node1"); err != nil || VerifiedShared(localPV) {
		t.Fatalf("a node's volume is VerifiedShared (%v)", err)
	}
	pv.Annotations = nil
	if VerifiedShared(pv) {
		t.Fatal("a volume of another provisioner is VerifiedShared")
	}
	if got := AccessModes(class); len(got) != 1 || got[0] != corev1.ReadWriteMany {
		t.Fatalf("AccessModes(shared) = %v", got)
	}
	if got := AccessModes(nil); len(got) != 1 || got[0] != corev1.ReadWriteOnce {
		t.Fatalf("AccessModes(nil) = %v", got)
	}
}

// TestUnsharedNodes: a root shows the nodes whose provisioners announced
// themselves there; the error names the others.
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
	if msg := notSharedError("s", root, "a", got).Error(); !strings.Contains(msg, "node(s) b") || !strings.Contains(msg, "class s") {
		t.Fatalf("error %q", msg)
	}
}

func TestWantsVolumeAndRelease(t *testing.T) {
	if !wantsVolume(claim(nil)) {
		t.Fatal("pending claim of our provisioner not wanted")
	}
	if wantsVolume(claim(func(p *corev1.PersistentVolumeClaim) { p.Spec.VolumeName = "x" })) {
		t.Fatal("bound claim wanted")
	}
	if wantsVolume(claim(func(p *corev1.PersistentVolumeClaim) { p.Annotations[annStorageProvisioner] = "other" })) {
		t.Fatal("claim of another provisioner wanted")
	}
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
}

func TestWithin(t *testing.T) {
	for path, want := range map[string]bool{"/data/pvc-1": true, "/data": false, "/data/../etc": false, "/etc": false, "/data/a/b": true} {
		if got := within("/data", path); got != want {
			t.Errorf("within(/data, %s) = %v", path, got)
		}
	}
}

func TestClaimNode(t *testing.T) {
	cases := map[string]struct {
		ann  map[string]string
		want string
	}{
		"any node":             {nil, ""},
		"scheduler's choice":   {map[string]string{AnnSelectedNode: "n2"}, "n2"},
		"asked for":            {map[string]string{AnnProvisionOnNode: "n3"}, "n3"},
		"scheduler over asked": {map[string]string{AnnSelectedNode: "n2", AnnProvisionOnNode: "n3"}, "n2"},
	}
	for name, tc := range cases {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}}
		if got := claimNode(pvc); got != tc.want {
			t.Errorf("%s: claimNode = %q, want %q", name, got, tc.want)
		}
	}
}

func TestVolumeNode(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hp"}}
	pv, err := volumeFor(claim(nil), class, "/data", "node-7")
	if err != nil {
		t.Fatal(err)
	}
	if got := VolumeNode(pv); got != "node-7" {
		t.Errorf("VolumeNode of our own volume = %q", got)
	}
	pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Key = "topology.kubernetes.io/zone"
	if got := VolumeNode(pv); got != "" {
		t.Errorf("VolumeNode of a zone-pinned volume = %q", got)
	}
	if got := VolumeNode(&corev1.PersistentVolume{}); got != "" {
		t.Errorf("VolumeNode of an unpinned volume = %q", got)
	}
}
