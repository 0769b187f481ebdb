package handler

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	v1 "kubevirt.io/api/core/v1"
)

func hotplugged(vmi *v1.VirtualMachineInstance, name string, phase v1.VolumePhase, podUID string) {
	vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, v1.VolumeStatus{Name: name, Phase: phase,
		HotplugVolume: &v1.HotplugVolumeStatus{AttachPodName: "hp-" + name, AttachPodUID: typesUID(podUID)}})
}

func inSpec(vmi *v1.VirtualMachineInstance, name string) {
	vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
		DataVolume: &v1.DataVolumeSource{Name: name, Hotpluggable: true}}})
}

func TestPlanHotplug(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{}
	for _, name := range []string{"held", "unheld", "attached", "waiting"} {
		inSpec(vmi, name)
	}
	hotplugged(vmi, "held", v1.HotplugVolumeAttachedToNode, "uid-1")
	hotplugged(vmi, "unheld", v1.HotplugVolumeAttachedToNode, "")
	hotplugged(vmi, "attached", v1.VolumeReady, "uid-2")
	hotplugged(vmi, "waiting", v1.VolumeBound, "")
	hotplugged(vmi, "removed", v1.VolumeReady, "uid-3")
	hotplugged(vmi, "gone", v1.HotplugVolumeUnMounted, "uid-4")
	w := planHotplug(vmi, map[string]string{"attached": "sdb", "removed": "sdc"})
	if len(w.attach) != 1 || w.attach[0].Name != "held" {
		t.Errorf("attach %+v, want the volume whose Pod holds its claim", w.attach)
	}
	if len(w.detach) != 1 || w.detach[0] != "removed" {
		t.Errorf("detach %v, want the volume out of the spec still in the domain", w.detach)
	}

	got := hotplugStatus(vmi, map[string]string{"held": "sdd", "attached": "sdb"}, map[string]error{"unheld": errors.New("no disk.img")})
	want := map[string]string{"held": "Ready/sdd", "attached": "Ready/sdb", "unheld": "AttachedToNode/", "waiting": "Bound/", "removed": "UnMountedFromPod/", "gone": "UnMountedFromPod/"}
	for _, vs := range got {
		if s := string(vs.Phase) + "/" + vs.Target; s != want[vs.Name] {
			t.Errorf("%s: %s, want %s", vs.Name, s, want[vs.Name])
		}
		if vs.Name == "unheld" && vs.Reason != reasonVolumeFailed {
			t.Errorf("a failed attach is not reported: %+v", vs)
		}
	}
	if !hotplugPending(vmi) {
		t.Error("volumes wait for the handler, yet nothing is pending")
	}
	waiting := &v1.VirtualMachineInstance{}
	inSpec(waiting, "far")
	hotplugged(waiting, "far", v1.VolumePending, "")
	if hotplugPending(waiting) {
		t.Error("a volume waiting for its attachment Pod keeps the handler polling")
	}
}

func typesUID(s string) types.UID { return types.UID(s) }
