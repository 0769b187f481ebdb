package e2e

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
	"github.com/tekvirt/tekvirt/controllers/hostpath"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestDynamicVolume binds a claim of the default StorageClass, writes to it
// from a pod, and checks that deleting the claim removes volume and data.
func TestDynamicVolume(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var volume string
	framework.Eventually(t, time.Minute, "claim Bound", func() error {
		got, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		volume = got.Spec.VolumeName
		return nil
	})
	pv, err := f.Kube.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != hoststorage.DriverName {
		t.Fatalf("volume %s is not the hostpath storage's CSI volume: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	dir := framework.VolumeDir(pv)
	if !strings.HasPrefix(dir, framework.StorageRoot+"/") {
		t.Fatalf("volume path %s is not under the storage root", dir)
	}
	dir = framework.VolumeHostDir(pv)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr(int64(65532))},
			Containers: []corev1.Container{{
				Name: "writer", Image: registryImage(t, f, "tekvirt/busybox"),
				Command:      []string{"sh", "-c", "echo persisted > /data/file"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}},
		},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitPodSucceeded(t, ns, "writer", 2*time.Minute)
	data, err := os.ReadFile(filepath.Join(dir, "file"))
	if err != nil || string(data) != "persisted\n" {
		t.Fatalf("file on the node = %q, %v", data, err)
	}
	if err := f.Kube.CoreV1().Pods(ns).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "released volume and its data removed", func() error {
		if _, err := f.Kube.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume %s still exists: %w", volume, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("%s still exists", dir)
		}
		return nil
	})
}

func ptr[T any](v T) *T { return &v }

// TestLegacyHostpathVolume: a volume as the hostpath provisioner made it
// before the storage was a CSI driver (a hostPath PersistentVolume of
// provisioner tekvirt.io/hostpath, pinned by hostname) still serves its
// claim, and its directory goes with it once the claim is deleted.
func TestLegacyHostpathVolume(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	admin := f.VMClient(t)
	node, _ := f.TwoNodes(t)
	name := "pvc-legacy-" + ns
	dir := filepath.Join(framework.StorageRoot, name)
	if err := os.MkdirAll(framework.HostPath(node, dir), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(framework.HostPath(node, dir), 0o777); err != nil {
		t.Fatal(err)
	}
	dirType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": hostpath.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "tekvirt-hostpath",
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "old"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if err := admin.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: name, StorageClassName: ptr("tekvirt-hostpath"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	if err := admin.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	writeClaim(t, f, admin, ns, "old", "echo kept > /data/file")
	if b, err := os.ReadFile(framework.HostPath(node, filepath.Join(dir, "file"))); err != nil || string(b) != "kept\n" {
		t.Fatalf("the legacy volume's file on %s: %q, %v", node, b, err)
	}
	if err := admin.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the released legacy volume and its directory removed", func() error {
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume %s still exists: %w", name, err)
		}
		if _, err := os.Stat(framework.HostPath(node, dir)); !os.IsNotExist(err) {
			return fmt.Errorf("%s still exists", dir)
		}
		return nil
	})
}
