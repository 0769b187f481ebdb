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
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestProvisionAndReclaim runs both reconcilers against a real API server:
// a claim gets a directory and a bound-to-be volume; once the volume is
// Released its directory and the volume go. The API server runs no PV
// controller here, so the test plays its part (the Released phase).
func TestProvisionAndReclaim(t *testing.T) {
	cfg := testenv.Start(t)
	scheme := testScheme(t)
	root := t.TempDir()
	c := testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		if err := (&ClaimReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), Root: root, Node: "node1"}).SetupWithManager(mgr); err != nil {
			return err
		}
		return (&VolumeReconciler{Client: mgr.GetClient(), Root: root, Node: "node1"}).SetupWithManager(mgr)
	})
	bg := context.Background()
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hp"}, Provisioner: Provisioner}
	if err := c.Create(bg, class); err != nil {
		t.Fatal(err)
	}
	pvc := testClaim(class.Name)
	if err := c.Create(bg, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	testenv.Eventually(t, "volume provisioned", func() error {
		return c.Get(bg, client.ObjectKey{Name: volumeName(pvc)}, pv)
	})
	dir := pv.Spec.HostPath.Path
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory %s: %v %v", dir, st, err)
	}
	if err := os.WriteFile(dir+"/data", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
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

// TestCordonedNodeLeavesClaims: while its node is cordoned, a provisioner
// leaves claims no node was asked for (to the other nodes'); uncordoned,
// it takes them again.
func TestCordonedNodeLeavesClaims(t *testing.T) {
	cfg := testenv.Start(t)
	scheme := testScheme(t)
	bg := context.Background()
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	if err := direct.Create(bg, node); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	c := testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		return (&ClaimReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test"), Root: root, Node: "node1"}).SetupWithManager(mgr)
	})
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hp"}, Provisioner: Provisioner}
	if err := c.Create(bg, class); err != nil {
		t.Fatal(err)
	}
	pvc := testClaim(class.Name)
	if err := c.Create(bg, pvc); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := c.Get(bg, client.ObjectKey{Name: volumeName(pvc)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a cordoned node's provisioner took the claim: %v", err)
	}
	node.Spec.Unschedulable = false
	if err := direct.Update(bg, node); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "volume provisioned once uncordoned", func() error {
		return c.Get(bg, client.ObjectKey{Name: volumeName(pvc)}, &corev1.PersistentVolume{})
	})
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// testClaim is a 1Gi claim "default/disk" of class, as the external
// provisioner annotation hands it to this provisioner.
func testClaim(class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "disk", Namespace: "default", Annotations: map[string]string{annStorageProvisioner: Provisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// TestSharedProvisioning: two nodes' provisioners on one shared root make
// one volume pinned to no node for a shared claim, and neither drops the
// other's directory; a node whose marker is missing makes them refuse,
// naming it in the claim's events.
func TestSharedProvisioning(t *testing.T) {
	cfg := testenv.Start(t)
	scheme := testScheme(t)
	bg := context.Background()
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node1", "node2"} {
		if err := direct.Create(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	shared := t.TempDir()
	c := testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		for _, n := range []string{"node1", "node2"} {
			if err := (&ClaimReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("test-" + n), Root: t.TempDir(), SharedRoot: shared, Node: n}).SetupWithManager(mgr); err != nil {
				return err
			}
		}
		return nil
	})
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Provisioner: Provisioner, Parameters: map[string]string{ParamShared: "true"}}
	if err := c.Create(bg, class); err != nil {
		t.Fatal(err)
	}
	if err := AnnounceNode(shared, "node1"); err != nil {
		t.Fatal(err)
	}
	pvc := testClaim(class.Name)
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	if err := c.Create(bg, pvc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a ProvisioningFailed event naming node2", func() error {
		evs := &eventsv1.EventList{}
		if err := c.List(bg, evs, client.InNamespace(pvc.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "ProvisioningFailed" && strings.Contains(e.Note, "node(s) node2") {
				return nil
			}
		}
		return fmt.Errorf("no such event among %d", len(evs.Items))
	})
	if err := c.Get(bg, client.ObjectKey{Name: volumeName(pvc)}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a volume was made on a root that is not shared with node2: %v", err)
	}
	if err := AnnounceNode(shared, "node2"); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	testenv.Eventually(t, "shared volume provisioned", func() error {
		return c.Get(bg, client.ObjectKey{Name: volumeName(pvc)}, pv)
	})
	if VolumeNode(pv) != "" || pv.Spec.NodeAffinity != nil || filepath.Dir(pv.Spec.HostPath.Path) != shared {
		t.Fatalf("shared volume %+v", pv.Spec)
	}
	// Both provisioners saw the claim; the one that lost the race must not
	// have removed the directory.
	time.Sleep(time.Second)
	if st, err := os.Stat(pv.Spec.HostPath.Path); err != nil || !st.IsDir() {
		t.Fatalf("shared volume directory: %v", err)
	}
}
