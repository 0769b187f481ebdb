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

	"github.com/tekvirt/tekvirt/contracts/hoststorage"
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
