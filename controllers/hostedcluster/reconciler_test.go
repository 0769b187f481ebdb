package hostedcluster

import (
	"context"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// TestOrphanedControlPlaneCollected: the control-plane namespace of a
// HostedCluster that is gone is deleted; one of another cluster, or of a
// cluster the API still has, is kept.
func TestOrphanedControlPlaneCollected(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hyperv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cpNamespace := func(name, owner string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{hc.ClusterAnnotation: owner}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cpNamespace("clusters-gone", "clusters/gone"),
		cpNamespace("clusters-squatted", "other/cluster"),
		cpNamespace("clusters-alive", "clusters/alive"),
		&hyperv1.HostedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "alive"}},
	).Build()
	// The reconciler's cache does not have "alive" yet; the API does.
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		cpNamespace("clusters-gone", "clusters/gone"),
		cpNamespace("clusters-squatted", "other/cluster"),
		cpNamespace("clusters-alive", "clusters/alive"),
	).Build()
	r := &Reconciler{Client: deleteThrough{cache, c}, Reader: c}
	for _, name := range []string{"gone", "squatted", "alive"} {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "clusters", Name: name}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, want := range map[string]bool{"clusters-gone": false, "clusters-squatted": true, "clusters-alive": true} {
		err := c.Get(context.Background(), client.ObjectKey{Name: name}, &corev1.Namespace{})
		if kept := !apierrors.IsNotFound(err); kept != want {
			t.Errorf("namespace %s kept %v, want %v (%v)", name, kept, want, err)
		}
	}
}

// deleteThrough reads from a cache and deletes in the API.
type deleteThrough struct {
	client.Client
	api client.Client
}

func (d deleteThrough) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return d.api.Delete(ctx, obj, opts...)
}
