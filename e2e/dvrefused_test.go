package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestDataVolumeImportPodRefused: a namespace whose ResourceQuota allows
// no Pod: the DataVolume's import waits, and says why where users look -
// its Running and Ready conditions (CDI's ErrExceededQuota, the API
// server's message) and an ErrExceededQuota event; with the quota raised
// the same import runs to the end. A clone of its claim made meanwhile
// waits for it (CloneScheduled, CloneSourceNotPopulated) and then runs.
func TestDataVolumeImportPodRefused(t *testing.T) {
	t.Parallel() // mostly waiting on its own VMs and runs: see "Parallel" in doc.go
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blank"}, Spec: cdiv1.DataVolumeSpec{
		Source:  &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
		Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}}
	if err := c.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the refusal on the DataVolume", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dv), dv); err != nil {
			return err
		}
		for _, cond := range dv.Status.Conditions {
			if cond.Type == cdiv1.DataVolumeRunning && cond.Reason == "ErrExceededQuota" && strings.Contains(cond.Message, "exceeded quota: no-pods") {
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %+v", dv.Status.Phase, dv.Status.Conditions)
	})
	if dv.Status.Phase != cdiv1.ImportScheduled {
		t.Errorf("phase %s while the Pod is refused, want ImportScheduled", dv.Status.Phase)
	}
	wantEvent(t, f, ns, dv.Name, "ErrExceededQuota", "exceeded quota: no-pods")
	// A clone of that claim waits for it, as CDI's clones do, rather than
	// read a disk that is not there yet.
	clone := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clone"}, Spec: cdiv1.DataVolumeSpec{
		Source:  &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: dv.Name}},
		Storage: dv.Spec.Storage.DeepCopy()}}
	if err := c.Create(ctx, clone); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the clone waiting for its source", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(clone), clone); err != nil {
			return err
		}
		for _, cond := range clone.Status.Conditions {
			if cond.Type == cdiv1.DataVolumeRunning && cond.Reason == datavolume.CloneSourceNotPopulatedReason && strings.Contains(cond.Message, "its DataVolume is ImportScheduled") {
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %+v", clone.Status.Phase, clone.Status.Conditions)
	})
	if clone.Status.Phase != cdiv1.CloneScheduled {
		t.Errorf("a clone waiting for its source is %s, want CloneScheduled", clone.Status.Phase)
	}
	if err := c.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	waitDVPhase(t, c, dv, cdiv1.Succeeded)
	waitDVPhase(t, c, clone, cdiv1.Succeeded)
}
