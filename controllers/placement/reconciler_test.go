package placement

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestPlacesWhenANodeFits runs the reconciler on a real API server: a VMI
// that fits no node is reported unschedulable with the scheduler's wording,
// and is placed as soon as a node it selects becomes Ready.
func TestPlacesWhenANodeFits(t *testing.T) {
	cfg := testenv.Start(t, filepath.Join("..", "config", "crd", "kubevirt.io_virtualmachineinstances.yaml"))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	ctx := context.Background()
	n := node("worker-1")
	cond := n.Status
	n.Status = corev1.NodeStatus{}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	v := vmi("web", "1Gi", func(v *v1.VirtualMachineInstance) { v.Namespace = "default" })
	if err := c.Create(ctx, v); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(v)
	testenv.Eventually(t, "VMI reported unschedulable", func() error {
		got := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		for _, cd := range got.Status.Conditions {
			if string(cd.Type) == string(corev1.PodScheduled) && cd.Status == corev1.ConditionFalse &&
				strings.Contains(cd.Message, "0/1 nodes are available: 1 node(s) were not ready") && got.Status.Phase == v1.Scheduling {
				return nil
			}
		}
		return fmt.Errorf("status %+v", got.Status)
	})
	// Play the kubelet and node lifecycle controller: Ready, and the
	// not-ready taint the API server put on the new node removed.
	n.Status = cond
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = nil
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "VMI placed once the node is Ready", func() error {
		got := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		if got.Status.NodeName != "worker-1" || got.Status.Phase != v1.Scheduled || got.Labels[NodeNameLabel] != "worker-1" {
			return fmt.Errorf("status %+v labels %v", got.Status, got.Labels)
		}
		return nil
	})
}
