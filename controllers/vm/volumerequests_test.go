package vm

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestVolumeRequests: virtctl addvolume --persist and removevolume
// --persist change the template and the running VMI, and the requests go.
func TestVolumeRequests(t *testing.T) {
	c := start(t)
	ctx := context.Background()
	vm := newVM("hotplug", v1.RunStrategyAlways)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(vm)
	settled(t, c, key, "VMI created", true)
	setPhase(t, c, key, v1.Running, true)
	queue := func(req v1.VirtualMachineVolumeRequest) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &v1.VirtualMachine{}
			if err := c.Get(ctx, key, got); err != nil {
				return err
			}
			got.Status.VolumeRequests = append(got.Status.VolumeRequests, req)
			return c.Status().Update(ctx, got)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	volumes := func(want int, what string) {
		t.Helper()
		testenv.Eventually(t, what, func() error {
			got, vmi, err := vmState(c, key)
			if err != nil || vmi == nil {
				return fmt.Errorf("VMI %v: %w", vmi, err)
			}
			tv, vv := got.Spec.Template.Spec.Volumes, vmi.Spec.Volumes
			if len(got.Status.VolumeRequests) != 0 || len(tv) != want || len(vv) != want ||
				len(got.Spec.Template.Spec.Domain.Devices.Disks) != want || len(vmi.Spec.Domain.Devices.Disks) != want {
				return fmt.Errorf("requests %d, template volumes %v, VMI volumes %v", len(got.Status.VolumeRequests), tv, vv)
			}
			if want > 0 && (!tv[0].PersistentVolumeClaim.Hotpluggable || vv[0].PersistentVolumeClaim.ClaimName != "data") {
				return fmt.Errorf("volumes %+v %+v", tv[0], vv[0])
			}
			return nil
		})
	}
	queue(v1.VirtualMachineVolumeRequest{AddVolumeOptions: &v1.AddVolumeOptions{Name: "data",
		Disk: &v1.Disk{Name: "data", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSCSI}}, Serial: "data"},
		VolumeSource: &v1.HotplugVolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}, Hotpluggable: true}}}})
	volumes(1, "the added volume in the template and the VMI")
	queue(v1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &v1.RemoveVolumeOptions{Name: "data"}})
	volumes(0, "the removed volume gone from both")
}
