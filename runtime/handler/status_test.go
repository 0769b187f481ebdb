package handler

import (
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/launcher"
)

func TestNextStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	scheduled := &v1.VirtualMachineInstance{
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
			{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}}}}},
		Status: v1.VirtualMachineInstanceStatus{Phase: v1.Scheduled, NodeName: "n1"},
	}
	withAgent := &launcher.Status{Domain: "running", AgentConnected: true,
		OSInfo:     &agent.OSInfo{Name: "Debian", KernelRelease: "6.1.0"},
		Interfaces: []agent.Interface{{Name: "lo"}, {Name: "eth0", MAC: "52:54:00:00:00:01", IPs: []agent.IP{{Address: "10.0.2.15"}}}},
		MACs:       map[string]string{"default": "52:54:00:00:00:01"}}
	for _, tc := range []struct {
		name       string
		obs        observation
		phase      v1.VirtualMachineInstancePhase
		ready      corev1.ConditionStatus // "" means no Ready condition
		reason     string
		agent      bool
		checkExtra func(*testing.T, v1.VirtualMachineInstanceStatus)
	}{
		{name: "launcher starting, no answer yet", obs: observation{state: Running}, phase: v1.Scheduled},
		{name: "domain running, agent not yet", obs: observation{state: Running, status: &launcher.Status{Domain: "running"}},
			phase: v1.Running, ready: corev1.ConditionTrue},
		{name: "agent connected reports guest", obs: observation{state: Running, status: withAgent}, phase: v1.Running, ready: corev1.ConditionTrue, agent: true,
			checkExtra: func(t *testing.T, st v1.VirtualMachineInstanceStatus) {
				if st.GuestOSInfo.KernelRelease != "6.1.0" || len(st.Interfaces) != 1 || st.Interfaces[0].Name != "default" ||
					st.Interfaces[0].InterfaceName != "eth0" || st.Interfaces[0].IP != "10.0.2.15" {
					t.Errorf("guest info %+v interfaces %+v", st.GuestOSInfo, st.Interfaces)
				}
			}},
		{name: "in a launcher Pod, the Pod's address", obs: observation{state: Running, status: &launcher.Status{Domain: "running", AgentConnected: true,
			Interfaces: withAgent.Interfaces, MACs: withAgent.MACs, PodIPs: []string{"10.244.0.7"}}}, phase: v1.Running, ready: corev1.ConditionTrue, agent: true,
			checkExtra: func(t *testing.T, st v1.VirtualMachineInstanceStatus) {
				if len(st.Interfaces) != 1 || st.Interfaces[0].Name != "default" || st.Interfaces[0].IP != "10.244.0.7" ||
					st.Interfaces[0].InterfaceName != "eth0" || len(st.Interfaces[0].IPs) != 1 {
					t.Errorf("interfaces %+v", st.Interfaces)
				}
			}},
		{name: "in a launcher Pod, before the agent", obs: observation{state: Running, status: &launcher.Status{Domain: "running", PodIPs: []string{"10.244.0.7"}}},
			phase: v1.Running, ready: corev1.ConditionTrue,
			checkExtra: func(t *testing.T, st v1.VirtualMachineInstanceStatus) {
				if len(st.Interfaces) != 1 || st.Interfaces[0].Name != "default" || st.Interfaces[0].IP != "10.244.0.7" {
					t.Errorf("interfaces %+v", st.Interfaces)
				}
			}},
		{name: "paused", obs: observation{state: Running, status: &launcher.Status{Domain: "paused"}}, phase: v1.Running, ready: corev1.ConditionFalse, reason: "Paused",
			checkExtra: func(t *testing.T, st v1.VirtualMachineInstanceStatus) {
				if c := findCond(st, v1.VirtualMachineInstancePaused); c == nil || c.Status != corev1.ConditionTrue {
					t.Errorf("Paused condition = %+v", c)
				}
			}},
		{name: "guest shut down", obs: observation{state: Exited, exit: &launcher.Exited{Exit: launcher.Exit{Reason: "Shutdown", Succeeded: true}}},
			phase: v1.Succeeded, ready: corev1.ConditionFalse, reason: reasonStopped},
		{name: "domain crashed", obs: observation{state: Exited, exit: &launcher.Exited{Exit: launcher.Exit{Reason: "Crashed"}}},
			phase: v1.Failed, ready: corev1.ConditionFalse, reason: reasonFailed},
		{name: "launcher killed", obs: observation{state: Lost}, phase: v1.Failed, ready: corev1.ConditionFalse, reason: reasonLauncherLost},
		{name: "image missing", obs: observation{state: NotStarted, prepareErr: &permanentError{reason: "ContainerDiskNotFound", err: errors.New("no such image")}},
			phase: v1.Failed, ready: corev1.ConditionFalse, reason: "ContainerDiskNotFound"},
		{name: "PVC not bound yet", obs: observation{state: NotStarted, prepareErr: errors.New("PVC not bound")}, phase: v1.Scheduled,
			checkExtra: func(t *testing.T, st v1.VirtualMachineInstanceStatus) {
				if c := findCond(st, v1.VirtualMachineInstanceSynchronized); c == nil || c.Reason != reasonVolumesPending || c.Message != "PVC not bound" {
					t.Errorf("Synchronized condition = %+v", c)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := nextStatus(scheduled, tc.obs, now)
			if st.Phase != tc.phase {
				t.Errorf("phase = %q, want %q", st.Phase, tc.phase)
			}
			ready := findCond(st, v1.VirtualMachineInstanceReady)
			switch {
			case tc.ready == "" && ready != nil:
				t.Errorf("Ready condition %+v, want none", ready)
			case tc.ready != "" && (ready == nil || ready.Status != tc.ready || ready.Reason != tc.reason):
				t.Errorf("Ready condition %+v, want %s/%s", ready, tc.ready, tc.reason)
			}
			if got := findCond(st, v1.VirtualMachineInstanceAgentConnected) != nil; got != tc.agent {
				t.Errorf("AgentConnected present = %v, want %v", got, tc.agent)
			}
			if tc.phase != scheduled.Status.Phase && (len(st.PhaseTransitionTimestamps) != 1 || st.PhaseTransitionTimestamps[0].Phase != tc.phase) {
				t.Errorf("phase transitions = %+v", st.PhaseTransitionTimestamps)
			}
			if tc.checkExtra != nil {
				tc.checkExtra(t, st)
			}
		})
	}
}

func TestConditionTransitionTimeKept(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var st v1.VirtualMachineInstanceStatus
	setCond(&st, v1.VirtualMachineInstanceReady, corev1.ConditionTrue, "", "", t0)
	setCond(&st, v1.VirtualMachineInstanceReady, corev1.ConditionTrue, "", "", t1)
	if c := findCond(st, v1.VirtualMachineInstanceReady); !c.LastTransitionTime.Equal(&t0) || !c.LastProbeTime.Equal(&t0) {
		t.Errorf("unchanged condition moved its times: %+v", c)
	}
	setCond(&st, v1.VirtualMachineInstanceReady, corev1.ConditionFalse, "X", "y", t1)
	if c := findCond(st, v1.VirtualMachineInstanceReady); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("changed condition kept its transition time: %+v", c)
	}
}

func TestAccessCredentialsCondition(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}}
	for _, tc := range []struct {
		name   string
		cs     *launcher.CredentialsStatus
		status corev1.ConditionStatus // "": no condition
		reason string
	}{
		{name: "none", cs: nil},
		{name: "synchronized", cs: &launcher.CredentialsStatus{Synchronized: true}, status: corev1.ConditionTrue, reason: "AccessCredentialsSyncSuccess"},
		{name: "failed", cs: &launcher.CredentialsStatus{Message: "Guest agent is offline"}, status: corev1.ConditionFalse, reason: "AccessCredentialsSyncFailed"},
	} {
		st := nextStatus(vmi, observation{state: Running, status: &launcher.Status{Domain: "running", AccessCredentials: tc.cs}}, now)
		c := findCond(st, v1.VirtualMachineInstanceAccessCredentialsSynchronized)
		switch {
		case tc.status == "" && c != nil:
			t.Errorf("%s: condition %+v, want none", tc.name, c)
		case tc.status != "" && (c == nil || c.Status != tc.status || c.Reason != tc.reason || tc.cs.Message != c.Message):
			t.Errorf("%s: condition %+v, want %s %s %q", tc.name, c, tc.status, tc.reason, tc.cs.Message)
		}
	}
}

// Every interface of the spec in order, matched to the guest's by MAC;
// the pod network's at the Pod's address, a Multus one at the guest's;
// a guest interface of no spec after them.
func TestInterfacesStatus(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{Spec: v1.VirtualMachineInstanceSpec{
		Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
			{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
			{Name: "red", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
		}}},
		Networks: []v1.Network{*v1.DefaultPodNetwork(), {Name: "red", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}}},
	}}
	ls := &launcher.Status{
		PodIPs: []string{"10.244.0.7"},
		MACs:   map[string]string{"default": "52:54:00:00:00:01", "red": "02:00:00:00:00:0e"},
		Interfaces: []agent.Interface{
			{Name: "lo", IPs: []agent.IP{{Address: "127.0.0.1"}}},
			{Name: "eth1", MAC: "02:00:00:00:00:0E", IPs: []agent.IP{{Address: "192.168.77.2"}}},
			{Name: "eth0", MAC: "52:54:00:00:00:01", IPs: []agent.IP{{Address: "10.0.2.2"}}},
			{Name: "dummy0", MAC: "ee:00:00:00:00:01"},
		},
	}
	got := interfaces(vmi, ls)
	want := []v1.VirtualMachineInstanceNetworkInterface{
		{Name: "default", MAC: "52:54:00:00:00:01", PodInterfaceName: "eth0", InterfaceName: "eth0", IP: "10.244.0.7", IPs: []string{"10.244.0.7"}, InfoSource: "domain, guest-agent"},
		{Name: "red", MAC: "02:00:00:00:00:0e", PodInterfaceName: "podb1f51a511f1", InterfaceName: "eth1", IP: "192.168.77.2", IPs: []string{"192.168.77.2"}, InfoSource: "domain, guest-agent"},
		{InterfaceName: "dummy0", MAC: "ee:00:00:00:00:01", InfoSource: "guest-agent"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
