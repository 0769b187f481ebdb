package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// defaulterWebhook is the MutatingWebhookConfiguration of the VM defaults.
const defaulterWebhook = "tekvirt-vm-defaulter"

// virtctlVM is the VM `virtctl create vm --volume-containerdisk=src:IMAGE
// --memory=256Mi` prints: a volume without its disk, no network.
func virtctlVM(ns, name string) *v1.VirtualMachine {
	q := resource.MustParse("256Mi")
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: ptrTo(v1.RunStrategyAlways),
			Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
				Domain:  v1.DomainSpec{Memory: &v1.Memory{Guest: &q}},
				Volumes: []v1.Volume{{Name: name + "-containerdisk-0", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: framework.GuestImage}}}},
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestVMAdmissionDefaulting compares the admission of a VM create (dry
// run: every webhook answers, nothing is stored) with the defaulting
// webhook and without it (the operator stopped and the webhook's
// configuration removed for the while), median of 20 each.
func TestVMAdmissionDefaulting(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	c := f.VMClient(t)
	ns := f.Namespace(t)
	measure := func(wantDefaults bool) time.Duration {
		t.Helper()
		var took []time.Duration
		for i := range 25 {
			vm := virtctlVM(ns, fmt.Sprintf("adm-%d", i))
			start := time.Now()
			if err := c.Create(ctx, vm, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			if i >= 5 { // the first five warm the connections up
				took = append(took, time.Since(start))
			}
			if got := len(vm.Spec.Template.Spec.Networks) == 1; got != wantDefaults {
				t.Fatalf("defaults written: %v, want %v", got, wantDefaults)
			}
		}
		return median(took)
	}
	// waitDefaults waits until the API server calls the defaulter (or no
	// longer does).
	waitDefaults := func(want bool) {
		t.Helper()
		framework.Eventually(t, 2*time.Minute, fmt.Sprintf("defaults written: %v", want), func() error {
			vm := virtctlVM(ns, "probe")
			if err := c.Create(ctx, vm, client.DryRunAll); err != nil {
				return err
			}
			if got := len(vm.Spec.Template.Spec.Networks) == 1; got != want {
				return fmt.Errorf("defaults written: %v", got)
			}
			return nil
		})
	}
	waitDefaults(true)
	with := measure(true)

	scale := func(n int32) {
		t.Helper()
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		if _, err := f.Kube.AppsV1().Deployments(ctrlconfig.Namespace).Patch(ctx, ctrlconfig.OperatorDeployment, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(0)
	t.Cleanup(func() {
		scale(1)
		waitDefaults(true)
	})
	framework.Eventually(t, time.Minute, "the operator stopped", func() error {
		pods, err := f.Kube.CoreV1().Pods(ctrlconfig.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + ctrlconfig.OperatorDeployment})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("operator Pods: %d (%w)", len(pods.Items), err)
		}
		return nil
	})
	err := f.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, defaulterWebhook, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitDefaults(false)
	without := measure(false)
	t.Logf("VM create admission (dry run, median of 20): with the defaulting webhook %s, validating only %s: ratio %.2f (goal <= 1.2)",
		with.Round(10*time.Microsecond), without.Round(10*time.Microsecond), float64(with)/float64(without))
}

// TestVirtctlVMStart compares create -> Running with its agent of the VM
// virtctl prints (the defaults written at admission) with the same VM
// written out by hand, interleaved, median of 3 each.
func TestVirtctlVMStart(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	c := f.VMClient(t)
	ns := f.Namespace(t)
	sata := v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}
	boot := func(vm *v1.VirtualMachine) time.Duration {
		t.Helper()
		start := time.Now()
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		framework.WaitVMI(t, c, ns, vm.Name, 4*time.Minute, "running with its agent", framework.AgentConnected)
		took := time.Since(start)
		if err := c.Delete(ctx, vm); err != nil {
			t.Fatal(err)
		}
		framework.WaitGone(t, c, &v1.VirtualMachineInstance{ObjectMeta: vm.ObjectMeta}, 2*time.Minute)
		return took
	}
	var printed, byHand []time.Duration
	for i := range 3 {
		printed = append(printed, boot(virtctlVM(ns, fmt.Sprintf("printed-%d", i))))
		vm := virtctlVM(ns, fmt.Sprintf("by-hand-%d", i))
		s := &vm.Spec.Template.Spec
		s.Domain.Devices.Disks = []v1.Disk{{Name: s.Volumes[0].Name, DiskDevice: sata}}
		s.Domain.Devices.Interfaces = []v1.Interface{*v1.DefaultMasqueradeNetworkInterface()}
		s.Networks = []v1.Network{*v1.DefaultPodNetwork()}
		s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
		byHand = append(byHand, boot(vm))
	}
	t.Logf("create -> Running with agent (median of 3): virtctl's VM %s, written out by hand %s: ratio %.2f (goal ~1.0)",
		median(printed).Round(time.Millisecond), median(byHand).Round(time.Millisecond), float64(median(printed))/float64(median(byHand)))
}
