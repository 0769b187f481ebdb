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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/vmdefaults"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// mutatorWebhook is the MutatingWebhookConfiguration of the VM defaults
// (and the requester record, in the same call).
const mutatorWebhook = "tekvirt-mutator"

// virtctlVM is the VM `virtctl create vm --volume-containerdisk=src:IMAGE
// --memory=256Mi` prints: a volume without its disk, no network.
func virtctlVM(ns, name string) *v1.VirtualMachine {
	q := resource.MustParse("256Mi")
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.VirtualMachineSpec{
			RunStrategy: ptr.To(v1.RunStrategyAlways),
			Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
				Domain:  v1.DomainSpec{Memory: &v1.Memory{Guest: &q}},
				Volumes: []v1.Volume{{Name: name + "-containerdisk-0", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: framework.GuestImage}}}},
			}},
		},
	}
}

// writtenOut is the VM of virtctlVM with every default written by hand,
// so that the defaulting webhook finds nothing to add.
func writtenOut(ns, name string) *v1.VirtualMachine {
	vm := virtctlVM(ns, name)
	s := &vm.Spec.Template.Spec
	s.Architecture = vmdefaults.Architecture
	s.Domain.Machine = &v1.Machine{Type: vmdefaults.MachineType}
	s.Domain.CPU = &v1.CPU{Sockets: 1, Cores: 1, Threads: 1}
	s.Domain.Firmware = &v1.Firmware{UUID: vmdefaults.FirmwareUUID(name)}
	s.Domain.Devices.Disks = []v1.Disk{{Name: s.Volumes[0].Name, DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}}}
	s.Domain.Devices.Interfaces = []v1.Interface{*v1.DefaultMasqueradeNetworkInterface()}
	s.Networks = []v1.Network{*v1.DefaultPodNetwork()}
	s.Domain.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	return vm
}

// TestVMAdmissionDefaulting measures what the defaults cost a VM create's
// admission (dry run: every webhook answers, nothing is stored), median of
// 20 each: virtctl's VM against the same VM with its defaults written out
// (the same webhook calls, nothing to add: the defaulting's own cost),
// interleaved; then against the validating webhook alone (the operator
// stopped and the mutating configuration removed for the while: the cost
// of the mutating call, which the requester record needed before the
// defaults shared it).
func TestVMAdmissionDefaulting(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	c := f.VMClient(t)
	ns := f.Namespace(t)
	create := func(vm *v1.VirtualMachine, wantDefaults bool) time.Duration {
		t.Helper()
		start := time.Now()
		if err := c.Create(ctx, vm, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if got := len(vm.Spec.Template.Spec.Networks) == 1; got != wantDefaults {
			t.Fatalf("defaults in VM %s: %v, want %v", vm.Name, got, wantDefaults)
		}
		return took
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
	var printed, byHand, validating []time.Duration
	for i := range 25 {
		p, h := create(virtctlVM(ns, fmt.Sprintf("adm-%d", i)), true), create(writtenOut(ns, fmt.Sprintf("adm-%d", i)), true)
		if i >= 5 { // the first five warm the connections up
			printed, byHand = append(printed, p), append(byHand, h)
		}
	}

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
	err := f.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, mutatorWebhook, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitDefaults(false)
	for i := range 25 {
		if took := create(virtctlVM(ns, fmt.Sprintf("adm-%d", i)), false); i >= 5 {
			validating = append(validating, took)
		}
	}
	p, h, v := median(printed), median(byHand), median(validating)
	t.Logf("VM create admission (dry run, median of 20): virtctl's VM %s, written out %s: defaulting ratio %.2f (goal <= 1.2); validating webhook alone %s: mutating call ratio %.2f",
		p.Round(10*time.Microsecond), h.Round(10*time.Microsecond), float64(p)/float64(h), v.Round(10*time.Microsecond), float64(p)/float64(v))
}

// TestVirtctlVMStart compares create -> Running with its agent of the VM
// virtctl prints (the defaults written at admission) with the same VM
// written out by hand, interleaved, median of 3 each.
func TestVirtctlVMStart(t *testing.T) {
	f := benchOnly(t)
	ctx := context.Background()
	c := f.VMClient(t)
	ns := f.Namespace(t)
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
		vm := writtenOut(ns, fmt.Sprintf("by-hand-%d", i))
		byHand = append(byHand, boot(vm))
	}
	t.Logf("create -> Running with agent (median of 3): virtctl's VM %s, written out by hand %s: ratio %.2f (goal ~1.0)",
		median(printed).Round(time.Millisecond), median(byHand).Round(time.Millisecond), float64(median(printed))/float64(median(byHand)))
}
