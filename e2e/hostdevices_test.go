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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// advertise sets (count > 0) or removes (count 0) an extended resource in
// node's status capacity, as a device plugin's kubelet would report it.
func advertise(t *testing.T, f *framework.Framework, node, res string, count int) {
	t.Helper()
	path := "/status/capacity/" + strings.ReplaceAll(res, "/", "~1")
	patch := fmt.Sprintf(`[{"op":"add","path":%q,"value":"%d"}]`, path, count)
	if count == 0 {
		patch = fmt.Sprintf(`[{"op":"remove","path":%q}]`, path)
	}
	if _, err := f.Kube.CoreV1().Nodes().Patch(context.Background(), node, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patching %s capacity of node %s: %v", res, node, err)
	}
}

// TestHostDevicesScheduleWhereAdvertised: a VMI's host devices are
// extended-resource requests of its launcher Pod. While no node advertises
// the device the VMI stays Scheduling with the scheduler's message; once
// one node advertises one, the Pod goes to that node, and a VMI wanting two
// still finds none. No PCI device exists here and no device plugin runs,
// so the launcher is given no address: the VMI fails naming the device and
// the variable a device plugin sets (the <hostdev> the launcher makes from
// it is checked by runtime/domain's golden test).
func TestHostDevicesScheduleWhereAdvertised(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	nodes := f.Nodes(t)
	node := nodes[len(nodes)-1]
	res := "devices.tekvirt.io/e2e-" + ns[len(ns)-5:]

	vmiWith := func(name string, devices int) *v1.VirtualMachineInstance {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: framework.GuestVMI(framework.GuestImage, name)}
		for i := range devices {
			vmi.Spec.Domain.Devices.HostDevices = append(vmi.Spec.Domain.Devices.HostDevices, v1.HostDevice{Name: fmt.Sprintf("dev-%d", i+1), DeviceName: res})
		}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		return vmi
	}
	one := vmiWith("one-device", 1)
	waitScheduling(t, c, ns, one.Name, "Insufficient "+res)
	pod := f.LauncherPod(t, one)
	if got := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceName(res)]; !got.Equal(resource.MustParse("1")) {
		t.Fatalf("launcher Pod limits %v, want 1 %s", pod.Spec.Containers[0].Resources.Limits, res)
	}

	advertise(t, f, node, res, 1)
	t.Cleanup(func() { advertise(t, f, node, res, 0) })
	two := vmiWith("two-devices", 2)
	framework.Eventually(t, time.Minute, "the one-device launcher Pod bound to "+node, func() error {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		if p.Spec.NodeName != node {
			return fmt.Errorf("on %q, conditions %+v", p.Spec.NodeName, p.Status.Conditions)
		}
		return nil
	})
	failed := framework.WaitVMI(t, c, ns, one.Name, 2*time.Minute, "failed for want of a device plugin's PCI address", func(v *v1.VirtualMachineInstance) error {
		if v.Status.Phase != v1.Failed {
			return fmt.Errorf("phase %q", v.Status.Phase)
		}
		return nil
	})
	msg := ""
	for _, cond := range failed.Status.Conditions {
		msg += cond.Message + "; "
	}
	t.Logf("VMI %s failed: %s", one.Name, msg)
	for _, want := range []string{"hostDevices[0] (dev-1)", "no PCI device of " + res, domain.PCIResourceEnv(res)} {
		if !strings.Contains(msg, want) {
			t.Errorf("VMI conditions %q lack %q", msg, want)
		}
	}
	// One advertised, two wanted: the scheduler still finds no node, even
	// with the first VMI's device free again.
	waitScheduling(t, c, ns, two.Name, "Insufficient "+res)
	time.Sleep(5 * time.Second)
	waitScheduling(t, c, ns, two.Name, "Insufficient "+res)
}
