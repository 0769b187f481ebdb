package vmi

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
)

// TestDeletedVMIOfAGoneNode: a deleted VMI that still holds its handler's
// finalizer is released by the controller only when its node is gone and
// so are its launcher Pods.
func TestDeletedVMIOfAGoneNode(t *testing.T) {
	for name, tc := range map[string]struct {
		nodeExists, podExists bool
		released              bool
	}{
		"node and Pods gone":         {released: true},
		"node there: its handler's":  {nodeExists: true},
		"node gone, its Pod not yet": {podExists: true},
		"node and Pod there":         {nodeExists: true, podExists: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			vmi := guestVMI()
			f := newPodFixture(t, vmi)
			f.reconcile() // the launcher Pod
			got := f.reconcile()
			got.Status.NodeName, got.Status.Phase = "node2", v1.Running
			if err := f.c.Status().Update(ctx, got); err != nil {
				t.Fatal(err)
			}
			controllerutil.AddFinalizer(got, launcherpod.HandlerFinalizer)
			if err := f.c.Update(ctx, got); err != nil {
				t.Fatal(err)
			}
			if tc.nodeExists {
				if err := f.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}}); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.podExists {
				pod := f.pods()[0]
				if err := f.c.Delete(ctx, &pod); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.c.Delete(ctx, got); err != nil {
				t.Fatal(err)
			}
			if _, err := f.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(got)}); err != nil {
				t.Fatal(err)
			}
			err := f.c.Get(ctx, client.ObjectKeyFromObject(got), &v1.VirtualMachineInstance{})
			if released := apierrors.IsNotFound(err); released != tc.released {
				t.Errorf("VMI gone %v (%v), want %v", released, err, tc.released)
			}
		})
	}
}
