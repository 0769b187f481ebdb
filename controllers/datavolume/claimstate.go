package datavolume

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// The annotations CDI keeps on a DataVolume's claim about the Pod that
// fills it (importer, clone target, upload server), which CDI's clients
// read: virtctl image-upload waits for ready before it sends and for phase
// Succeeded before it says "Processing completed successfully".
const (
	AnnPodPhase = "cdi.kubevirt.io/storage.pod.phase"
	AnnPodReady = "cdi.kubevirt.io/storage.pod.ready"
)

// claimPodState is what those annotations say for a DataVolume in st: the
// phase of the Pod of its run, and whether it serves (running, and for an
// upload, answering).
func claimPodState(st cdiv1.DataVolumeStatus) (phase corev1.PodPhase, ready bool) {
	switch st.Phase {
	case cdiv1.ImportScheduled, cdiv1.CloneScheduled, cdiv1.UploadScheduled:
		return corev1.PodPending, false
	case cdiv1.ImportInProgress, cdiv1.CloneInProgress, cdiv1.UploadReady:
		return corev1.PodRunning, true
	case cdiv1.Succeeded:
		return corev1.PodSucceeded, false
	case cdiv1.Failed:
		return corev1.PodFailed, false
	}
	return "", false
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=patch

// annotateClaim records the state of the claim's Pod for st on pvc, when it
// changed.
func (r *Reconciler) annotateClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, st cdiv1.DataVolumeStatus) error {
	phase, ready := claimPodState(st)
	if pvc == nil || phase == "" {
		return nil
	}
	want := map[string]string{AnnPodPhase: string(phase), AnnPodReady: fmt.Sprint(ready)}
	if pvc.Annotations[AnnPodPhase] == want[AnnPodPhase] && pvc.Annotations[AnnPodReady] == want[AnnPodReady] {
		return nil
	}
	base := pvc.DeepCopy()
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	for k, v := range want {
		pvc.Annotations[k] = v
	}
	if err := r.Client.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("annotating PVC %s: %w", klog.KObj(pvc), err)
	}
	return nil
}
