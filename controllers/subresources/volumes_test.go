package subresources

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

// TestVolumeChanges sends the bodies virtctl addvolume and removevolume
// send: on a VMI the spec changes, on a VM (--persist) a request is queued.
func TestVolumeChanges(t *testing.T) {
	a, c := testAPI(t)
	ctx := context.Background()
	path := func(res, name, sub string) string {
		return "/apis/" + groupVersion + "/namespaces/ns/" + res + "/" + name + "/" + sub
	}
	add := `{"name":"data","disk":{"name":"","serial":"data"},"volumeSource":{"dataVolume":{"name":"data"}}}`
	if w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "addvolume"), "bob", add); w.Code != http.StatusForbidden {
		t.Errorf("addvolume by bob: %d %s", w.Code, w.Body)
	}
	if w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "addvolume"), "alice", `{"dryRun":["All"],`+add[1:]); w.Code != http.StatusAccepted {
		t.Errorf("dry-run addvolume: %d %s", w.Code, w.Body)
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "manual"}, vmi); err != nil || len(vmi.Spec.Volumes) != 0 {
		t.Fatalf("a dry run changed the VMI: %v %v", vmi.Spec.Volumes, err)
	}
	if w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "addvolume"), "alice", add); w.Code != http.StatusAccepted {
		t.Fatalf("addvolume: %d %s", w.Code, w.Body)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "manual"}, vmi); err != nil {
		t.Fatal(err)
	}
	if len(vmi.Spec.Volumes) != 1 || vmi.Spec.Volumes[0].DataVolume == nil || !vmi.Spec.Volumes[0].DataVolume.Hotpluggable ||
		len(vmi.Spec.Domain.Devices.Disks) != 1 || vmi.Spec.Domain.Devices.Disks[0].Name != "data" || vmi.Spec.Domain.Devices.Disks[0].Disk.Bus != v1.DiskBusSCSI {
		t.Errorf("hotplugged VMI spec: %+v %+v", vmi.Spec.Volumes, vmi.Spec.Domain.Devices.Disks)
	}
	w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "addvolume"), "alice", add)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "Unable to add volume [data] because volume with that name already exists") {
		t.Errorf("second addvolume: %d %s", w.Code, w.Body)
	}
	w = serve(t, a, "PUT", path("virtualmachineinstances", "manual", "addvolume"), "alice", `{"name":"lun","disk":{"lun":{"bus":"scsi"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"lun"}}}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `disk \"lun\": lun disks cannot be hotplugged`) {
		t.Errorf("lun addvolume: %d %s", w.Code, w.Body)
	}
	// A claim that is not there, or that another VMI holds on its node, is
	// refused before anything changes; a shared one is not.
	for _, tc := range []struct {
		claim string
		code  int
		msg   string
	}{
		{"missing", http.StatusBadRequest, "Unable to add volume [v]: PersistentVolumeClaim missing does not exist in namespace ns"},
		{"held", http.StatusConflict, "Unable to add volume [v]: claim held is not ReadWriteMany and VirtualMachineInstance holder uses it"},
		{"common", http.StatusAccepted, ""},
	} {
		body := `{"name":"v","disk":{"name":"v","disk":{"bus":"scsi"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"` + tc.claim + `"}}}`
		w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "addvolume"), "alice", body)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.msg) {
			t.Errorf("addvolume of claim %s: %d %s, want %d %q", tc.claim, w.Code, w.Body, tc.code, tc.msg)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "manual"}, vmi); err != nil || len(vmi.Spec.Volumes) != 2 {
		t.Fatalf("VMI volumes after the refused claims: %+v %v", vmi.Spec.Volumes, err)
	}
	if w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "removevolume"), "alice", `{"name":"v"}`); w.Code != http.StatusAccepted {
		t.Errorf("removevolume v: %d %s", w.Code, w.Body)
	}
	if w := serve(t, a, "PUT", path("virtualmachineinstances", "manual", "removevolume"), "alice", `{"name":"data"}`); w.Code != http.StatusAccepted {
		t.Errorf("removevolume: %d %s", w.Code, w.Body)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "manual"}, vmi); err != nil || len(vmi.Spec.Volumes)+len(vmi.Spec.Domain.Devices.Disks) != 0 {
		t.Errorf("VMI after removevolume: %+v %v", vmi.Spec, err)
	}
	w = serve(t, a, "PUT", path("virtualmachineinstances", "manual", "removevolume"), "alice", `{"name":"data"}`)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "Unable to remove volume [data] because it does not exist") {
		t.Errorf("removevolume of a volume not there: %d %s", w.Code, w.Body)
	}

	if w := serve(t, a, "PUT", path("virtualmachines", "always", "addvolume"), "alice", add); w.Code != http.StatusAccepted {
		t.Fatalf("persisted addvolume: %d %s", w.Code, w.Body)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "always"}, vm); err != nil || len(vm.Status.VolumeRequests) != 1 || vm.Status.VolumeRequests[0].AddVolumeOptions.Name != "data" {
		t.Fatalf("VM volume requests: %+v %v", vm.Status.VolumeRequests, err)
	}
	w = serve(t, a, "PUT", path("virtualmachines", "always", "addvolume"), "alice", add)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "add volume request for volume [data] already exists") {
		t.Errorf("second persisted addvolume: %d %s", w.Code, w.Body)
	}
	if w := serve(t, a, "PUT", path("virtualmachineinstances", "halted", "addvolume"), "alice", add); w.Code != http.StatusNotFound {
		t.Errorf("addvolume of a VMI that does not exist: %d %s", w.Code, w.Body)
	}
}
