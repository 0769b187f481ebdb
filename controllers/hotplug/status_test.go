package hotplug

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

func hotplugVMI(volumes ...string) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{}
	vmi.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}}
	vmi.Status.VolumeStatus = []v1.VolumeStatus{{Name: "root"}}
	for _, name := range volumes {
		vmi.Spec.Volumes = append(vmi.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{
			DataVolume: &v1.DataVolumeSource{Name: name, Hotpluggable: true}}})
	}
	return vmi
}

func attachPod(name string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hp-volume-" + name, UID: types.UID("uid-hp-" + name)}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: AttacherContainer, Ready: ready}}
	return p
}

func boundClaim(name string) Source {
	return Source{Claim: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}}
}

// TestVolumeStatus walks a hotplugged volume through the controller's
// phases, and one taken out through Detaching to gone.
func TestVolumeStatus(t *testing.T) {
	importing := boundClaim("data")
	importing.DataVolume = &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Status: cdiv1.DataVolumeStatus{Phase: cdiv1.ImportInProgress}}
	unschedulable := attachPod("data", false)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available"}}
	for _, tc := range []struct {
		name       string
		vmi        *v1.VirtualMachineInstance
		was        *v1.VolumeStatus
		pod        *corev1.Pod
		src        Source
		want       string // phase/reason of "data", or "gone"
		wantPodUID bool
	}{
		{name: "claim missing", vmi: hotplugVMI("data"), want: "Pending/FailedPvcNotFound"},
		{name: "DataVolume importing", vmi: hotplugVMI("data"), src: importing, want: "Pending/PVCNotReady"},
		{name: "claim bound, no Pod yet", vmi: hotplugVMI("data"), src: boundClaim("data"), want: "Bound/PVCNotReady"},
		{name: "Pod made", vmi: hotplugVMI("data"), src: boundClaim("data"), pod: attachPod("data", false), want: "AttachedToNode/SuccessfulCreate"},
		{name: "Pod holds the claim", vmi: hotplugVMI("data"), src: boundClaim("data"), pod: attachPod("data", true), want: "AttachedToNode/SuccessfulCreate", wantPodUID: true},
		{name: "Pod cannot be scheduled", vmi: hotplugVMI("data"), src: boundClaim("data"), pod: unschedulable, want: "Pending/AttachmentPodUnschedulable"},
		{name: "the handler's phase stays", vmi: hotplugVMI("data"), src: boundClaim("data"), pod: attachPod("data", true),
			was: &v1.VolumeStatus{Name: "data", Phase: v1.VolumeReady, Reason: "VolumeReady", HotplugVolume: &v1.HotplugVolumeStatus{}}, want: "Ready/VolumeReady", wantPodUID: true},
		{name: "taken out, still in the domain", vmi: hotplugVMI(), pod: attachPod("data", true),
			was: &v1.VolumeStatus{Name: "data", Phase: v1.VolumeReady, Reason: "VolumeReady", HotplugVolume: &v1.HotplugVolumeStatus{}}, want: "Ready/VolumeReady"},
		{name: "taken out of the domain", vmi: hotplugVMI(), pod: attachPod("data", true),
			was: &v1.VolumeStatus{Name: "data", Phase: v1.HotplugVolumeUnMounted, HotplugVolume: &v1.HotplugVolumeStatus{}}, want: "Detaching/SuccessfulDelete"},
		{name: "its Pod gone", vmi: hotplugVMI(),
			was: &v1.VolumeStatus{Name: "data", Phase: v1.HotplugVolumeDetaching, HotplugVolume: &v1.HotplugVolumeStatus{}}, want: "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.was != nil {
				tc.vmi.Status.VolumeStatus = append(tc.vmi.Status.VolumeStatus, *tc.was)
			}
			pods := map[string]*corev1.Pod{}
			if tc.pod != nil {
				pods["data"] = tc.pod
			}
			got := VolumeStatus(tc.vmi, pods, map[string]Source{"data": tc.src})
			var data, root *v1.VolumeStatus
			for i := range got {
				switch got[i].Name {
				case "data":
					data = &got[i]
				case "root":
					root = &got[i]
				}
			}
			if root == nil {
				t.Fatalf("the boot volume's entry is not kept: %+v", got)
			}
			phase := "gone"
			if data != nil {
				phase = string(data.Phase) + "/" + data.Reason
			}
			if phase != tc.want {
				t.Fatalf("got %s (%+v), want %s", phase, data, tc.want)
			}
			if data != nil && (data.HotplugVolume.AttachPodUID != "") != tc.wantPodUID {
				t.Errorf("attach Pod UID %q, want set: %v", data.HotplugVolume.AttachPodUID, tc.wantPodUID)
			}
			if tc.name == "Pod cannot be scheduled" && !strings.Contains(data.Message, "0/2 nodes are available") {
				t.Errorf("message %q does not say why", data.Message)
			}
		})
	}
}

func TestPlanPods(t *testing.T) {
	vmi := hotplugVMI("new", "held", "waiting")
	pods := map[string]*corev1.Pod{"held": attachPod("held", true), "old": attachPod("old", true), "leaving": attachPod("leaving", true)}
	status := []v1.VolumeStatus{{Name: "leaving", Phase: v1.VolumeReady, HotplugVolume: &v1.HotplugVolumeStatus{}}, {Name: "old", Phase: v1.HotplugVolumeUnMounted, HotplugVolume: &v1.HotplugVolumeStatus{}}}
	sources := map[string]Source{"new": boundClaim("new"), "held": boundClaim("held")}
	p := PlanPods(vmi, status, pods, sources)
	if len(p.Create) != 1 || p.Create[0].Name != "new" {
		t.Errorf("create %+v, want the volume with a claim and no Pod", p.Create)
	}
	if len(p.Delete) != 1 || p.Delete[0].Name != "hp-volume-old" {
		t.Errorf("delete %+v, want only the Pod of the volume out of the domain", p.Delete)
	}
}

// TestVolumeStatusLeavesTheVMIAlone: the status computed is a copy; the
// VMI read stays as read, so that a change is seen as one.
func TestVolumeStatusLeavesTheVMIAlone(t *testing.T) {
	vmi := hotplugVMI("data")
	vmi.Status.VolumeStatus = append(vmi.Status.VolumeStatus, v1.VolumeStatus{Name: "data", Phase: v1.HotplugVolumeAttachedToNode, HotplugVolume: &v1.HotplugVolumeStatus{AttachPodName: "hp-volume-data"}})
	got := VolumeStatus(vmi, map[string]*corev1.Pod{"data": attachPod("data", true)}, map[string]Source{"data": boundClaim("data")})
	if vmi.Status.VolumeStatus[1].HotplugVolume.AttachPodUID != "" {
		t.Errorf("the VMI read was changed: %+v", vmi.Status.VolumeStatus[1].HotplugVolume)
	}
	if got[0].HotplugVolume.AttachPodUID == "" {
		t.Errorf("the Pod's UID is not in the status computed: %+v", got[0].HotplugVolume)
	}
}
