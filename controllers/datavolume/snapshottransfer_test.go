package datavolume

import (
	"context"
	"strings"
	"testing"

	vsv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/requester"
)

// TestTransferClaim: a DataVolume of another namespace's VolumeSnapshot is
// authorized as a clone from there; it waits for the snapshot, restores it
// into a transfer claim beside it (the DataVolume's class and modes, the
// snapshot's size if larger) and, once that is bound, clones that claim;
// a requester who may not clone from there fails it.
func TestTransferClaim(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, vsv1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	snap := &vsv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "theirs", Name: "snap"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(snap).WithStatusSubresource(snap).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authzv1.SubjectAccessReview); ok {
				sar.Status.Allowed = sar.Spec.User == "alice"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c}
	ctx := context.Background()
	dv := func(who string) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "mine", Name: "copy", UID: "dv-uid",
			Annotations: map[string]string{requester.Annotation: `{"username":"` + who + `"}`}},
			Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Namespace: "theirs", Name: "snap"}},
				PVC: &corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("local"),
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}}
	}

	if !Receives(dv("alice")) {
		t.Error("a DataVolume of another namespace's snapshot does not receive its disk through the upload proxy")
	}
	var obs observed
	if _, done, _ := r.transfer(ctx, dv("bob"), &obs); !done || obs.invalid == nil || !strings.Contains(obs.invalid.Error(), "bob may not clone VolumeSnapshot theirs/snap") {
		t.Fatalf("bob's clone: done %v, invalid %v", done, obs.invalid)
	}
	obs = observed{}
	if _, done, err := r.transfer(ctx, dv("alice"), &obs); !done || err != nil || !strings.Contains(obs.sourcePending, "VolumeSnapshot theirs/snap to be ready") {
		t.Fatalf("before the snapshot is ready: done %v, %v, pending %q", done, err, obs.sourcePending)
	}
	snap.Status = &vsv1.VolumeSnapshotStatus{ReadyToUse: ptr.To(true), RestoreSize: ptr.To(resource.MustParse("100Mi"))}
	if err := c.Status().Update(ctx, snap); err != nil {
		t.Fatal(err)
	}
	obs = observed{}
	if _, done, err := r.transfer(ctx, dv("alice"), &obs); !done || err != nil || !strings.Contains(obs.sourcePending, "into PersistentVolumeClaim theirs/tekvirt-transfer-dv-uid") {
		t.Fatalf("restoring: done %v, %v, pending %q", done, err, obs.sourcePending)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "theirs", Name: "tekvirt-transfer-dv-uid"}, claim); err != nil {
		t.Fatal(err)
	}
	if ds := claim.Spec.DataSource; ds == nil || ds.Kind != "VolumeSnapshot" || ds.Name != "snap" || *claim.Spec.StorageClassName != "local" ||
		claim.Spec.Resources.Requests.Storage().String() != "100Mi" || claim.Labels[TransferLabel] != "dv-uid" {
		t.Fatalf("transfer claim %+v", claim)
	}
	claim.Status.Phase = corev1.ClaimBound
	if err := c.Status().Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	d := dv("alice")
	obs = observed{}
	if _, done, err := r.transfer(ctx, d, &obs); done || err != nil {
		t.Fatalf("bound: done %v, %v", done, err)
	}
	if src := d.Spec.Source.PVC; src == nil || src.Namespace != "theirs" || src.Name != "tekvirt-transfer-dv-uid" || !crossNamespace(d) {
		t.Fatalf("the DataVolume clones %+v", d.Spec.Source)
	}
	if err := r.deleteTransfers(ctx, "mine", "copy", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err == nil {
		t.Error("the transfer claim outlived the DataVolume")
	}
}
