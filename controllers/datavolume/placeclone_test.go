package datavolume

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

// TestPlaceClone: a same-namespace clone's claim asks for its source's node
// (one Pod mounts both), and waits while the source has no volume yet; a
// clone from another namespace (sent over the network), a missing source
// and a claim that names its node already are left alone.
func TestPlaceClone(t *testing.T) {
	pinned := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-src"},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}}}}}}}
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "src"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-src"}}
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending"}}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(pinned, bound, pending).Build()}
	clone := func(srcNS, src string) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "copy"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: srcNS, Name: src}}}}
	}
	for _, tc := range []struct {
		name  string
		dv    *cdiv1.DataVolume
		asked string
		want  string
		wait  bool
	}{
		{"same namespace", clone("", "src"), "", "node-2", false},
		{"same namespace named", clone("ns", "src"), "", "node-2", false},
		{"other namespace", clone("golden", "src"), "", "", false},
		{"source not bound", clone("", "pending"), "", "", true},
		{"source missing", clone("", "nope"), "", "", false},
		{"already asked", clone("", "src"), "node-9", "node-9", false},
		{"import", &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://x"}}}}, "", "", false},
	} {
		pvc := &corev1.PersistentVolumeClaim{}
		if tc.asked != "" {
			pvc.Annotations = map[string]string{hostpath.AnnProvisionOnNode: tc.asked}
		}
		waiting, err := r.placeClone(context.Background(), tc.dv, pvc)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if (waiting != "") != tc.wait || (tc.wait && !strings.Contains(waiting, "ns/pending")) {
			t.Errorf("%s: waiting %q, want a wait: %v", tc.name, waiting, tc.wait)
		}
		if got := pvc.Annotations[hostpath.AnnProvisionOnNode]; got != tc.want {
			t.Errorf("%s: claim asks for node %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestWaitsForConsumer: a claim of a WaitForFirstConsumer class is imported
// into while still Pending (the run's Pod binds it); any other claim waits
// for its volume.
func TestWaitsForConsumer(t *testing.T) {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, VolumeBindingMode: &wffc},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "now"}, VolumeBindingMode: &immediate},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "unset"}},
	).Build()}
	for class, want := range map[string]bool{"local": true, "now": false, "unset": false, "missing": false, "": false} {
		pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}
		got, err := r.waitsForConsumer(context.Background(), pvc)
		if err != nil || got != want {
			t.Errorf("class %q: waitsForConsumer = %v, %v; want %v", class, got, err, want)
		}
	}
}

// TestEnsureClaimStaleCache: a claim an earlier pass created, which the
// cache does not show yet, is the DataVolume's claim (read from the API
// server), not a failure; someone else's claim of that name still is one;
// the API server's passing trouble is retried, not shown as Failed.
func TestEnsureClaimStaleCache(t *testing.T) {
	class := "hostpath-csi"
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk", UID: "dv-uid"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}},
			PVC: &corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}
	claim := func(owner *metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk"}}
		if owner != nil {
			pvc.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return pvc
	}
	yes := true
	ours := &metav1.OwnerReference{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume", Name: "disk", UID: "dv-uid", Controller: &yes}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = cdiv1.AddToScheme(scheme)
	// The cache: it has not seen the claim yet.
	stale := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}}).WithObjects(claim(ours)).Build()
	r := &Reconciler{Client: stale, Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim(ours)).Build()}
	pvc, err := r.ensureClaim(context.Background(), dv, &observed{})
	if err != nil || pvc == nil || !metav1.IsControlledBy(pvc, dv) {
		t.Errorf("a claim the cache has not seen: got %v, %v; want the DataVolume's claim", pvc, err)
	}

	theirs := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim(nil)).Build()
	r = &Reconciler{Client: stale, Reader: theirs}
	if _, err := r.ensureClaim(context.Background(), dv, &observed{}); err == nil || transient(err) || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("another's claim of the name: got %v, want a lasting refusal", err)
	}

	busy := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return apierrors.NewServiceUnavailable("etcd leader changed")
		}}).Build()
	r = &Reconciler{Client: busy, Reader: busy}
	if _, err := r.ensureClaim(context.Background(), dv, &observed{}); !transient(err) {
		t.Errorf("an unavailable API server: got %v, want it retried", err)
	}
	if transient(fmt.Errorf("spec.storage or spec.pvc is required")) {
		t.Error("a refusal of the spec was taken for passing trouble")
	}
}
