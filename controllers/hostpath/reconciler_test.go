package hostpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestReclaimLegacyVolume runs the volume reconciler against a real API
// server: a hostPath volume the provisioner made before the CSI driver
// keeps its directory while bound; once Released, its directory and the
// volume go. The API server runs no PV controller here, so the test plays
// its part (the Released phase).
func TestReclaimLegacyVolume(t *testing.T) {
	cfg := testenv.Start(t)
	scheme := testScheme(t)
	root := t.TempDir()
	c := testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		return (&VolumeReconciler{Client: mgr.GetClient(), Root: root, Node: "node1"}).SetupWithManager(mgr)
	})
	bg := context.Background()
	dir := filepath.Join(root, "pvc-1234")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/disk.img", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pv := legacyVolume("pvc-1234", dir, "node1")
	if err := c.Create(bg, pv); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("a volume that is not released lost its directory: %v", err)
	}
	pv.Status.Phase = corev1.VolumeReleased
	if err := c.Status().Update(bg, pv); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "released volume reclaimed", func() error {
		// Without kube-controller-manager the pv-protection finalizer stays:
		// a deletion timestamp is what the reconciler can achieve.
		got := &corev1.PersistentVolume{}
		if err := c.Get(bg, client.ObjectKey{Name: pv.Name}, got); !apierrors.IsNotFound(err) && got.DeletionTimestamp == nil {
			return fmt.Errorf("volume not deleted: %w", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("directory still there: %w", err)
		}
		return nil
	})
}

// legacyVolume is a hostPath volume as the provisioner before the CSI
// driver made it, at dir on node.
func legacyVolume(name, dir, node string) *corev1.PersistentVolume {
	dirType := corev1.HostPathDirectory
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "tekvirt-hostpath",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestCheckShared: a node may make shared volumes only once the shared
// root shows every node's marker, and the refusal names the nodes missing.
func TestCheckShared(t *testing.T) {
	cfg := testenv.Start(t)
	bg := context.Background()
	c, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node1", "node2"} {
		if err := c.Create(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	shared := t.TempDir()
	if err := CheckShared(bg, c, "", "node1"); err == nil || !strings.Contains(err.Error(), "no shared root") {
		t.Errorf("no shared root: %v", err)
	}
	if err := AnnounceNode(shared, "node1"); err != nil {
		t.Fatal(err)
	}
	if err := CheckShared(bg, c, shared, "node1"); err == nil || !strings.Contains(err.Error(), "node(s) node2") {
		t.Errorf("node2's marker missing: %v", err)
	}
	if err := AnnounceNode(shared, "node2"); err != nil {
		t.Fatal(err)
	}
	if err := CheckShared(bg, c, shared, "node1"); err != nil {
		t.Errorf("every marker there: %v", err)
	}
}

// TestPlacement: a claim placed on a node goes there only; a cordoned node
// holds no new volume but for a claim placed on it.
func TestPlacement(t *testing.T) {
	cfg := testenv.Start(t)
	bg := context.Background()
	c, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
	if err := c.Create(bg, node); err != nil {
		t.Fatal(err)
	}
	free, placed := testClaim("free", nil), testClaim("placed", map[string]string{AnnProvisionOnNode: "node1"})
	for _, pvc := range []*corev1.PersistentVolumeClaim{free, placed} {
		if err := c.Create(bg, pvc); err != nil {
			t.Fatal(err)
		}
	}
	if err := Placement(bg, c, "node1", "default", free.Name); err != nil {
		t.Errorf("schedulable node: %v", err)
	}
	if err := Placement(bg, c, "node2", "default", placed.Name); err == nil || !strings.Contains(err.Error(), "asks for node node1") {
		t.Errorf("a claim placed on another node: %v", err)
	}
	node.Spec.Unschedulable = true
	if err := c.Update(bg, node); err != nil {
		t.Fatal(err)
	}
	if err := Placement(bg, c, "node1", "default", free.Name); err == nil || !strings.Contains(err.Error(), "node node1 is cordoned") {
		t.Errorf("cordoned node, a claim no node was asked for: %v", err)
	}
	if err := Placement(bg, c, "node1", "default", placed.Name); err != nil {
		t.Errorf("cordoned node, a claim placed there: %v", err)
	}
	if err := Placement(bg, c, "gone", "default", free.Name); err != nil {
		t.Errorf("a node that is not there: %v", err)
	}
	if err := Placement(bg, c, "node1", "default", "missing"); err == nil {
		t.Error("a claim that is not there placed")
	}
}

// testClaim is a 1Gi claim default/name with annotations.
func testClaim(name string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}
