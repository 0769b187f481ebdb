package handler

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"
)

// TestStaleLaunch: a VMI the cache still shows Scheduled, without a VM
// directory, is launched only if the API server agrees it is Scheduled.
func TestStaleLaunch(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cached := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "u1"},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n"}}
	h := &Handler{Root: t.TempDir()}
	d := h.dirOf(cached.UID)
	for _, tc := range []struct {
		name  string
		live  v1.VirtualMachineInstancePhase
		uid   string
		stale bool
	}{
		{"the API server agrees", v1.Scheduled, "u1", false},
		{"failed for good by an earlier reconcile", v1.Failed, "u1", true},
		{"a new VMI of the same name", v1.Scheduled, "u2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := cached.DeepCopy()
			live.Status.Phase, live.UID = tc.live, types.UID(tc.uid)
			h.Reader = fake.NewClientBuilder().WithScheme(s).WithObjects(live).Build()
			stale, err := h.staleLaunch(context.Background(), cached, d)
			if err != nil || stale != tc.stale {
				t.Fatalf("stale = %v, %v; want %v", stale, err, tc.stale)
			}
		})
	}
	h.Reader = fake.NewClientBuilder().WithScheme(s).Build()
	if stale, err := h.staleLaunch(context.Background(), cached, d); err != nil || !stale {
		t.Errorf("a VMI gone from the API server: stale = %v, %v", stale, err)
	}
	running := cached.DeepCopy()
	running.Status.Phase = v1.Running
	if stale, err := h.staleLaunch(context.Background(), running, d); err != nil || stale {
		t.Errorf("a Running VMI is never a launch: stale = %v, %v", stale, err)
	}
}
