package subresources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
)

func TestValidateOp(t *testing.T) {
	with := func(phase v1.VirtualMachineInstancePhase, conds ...v1.VirtualMachineInstanceConditionType) *v1.VirtualMachineInstance {
		vmi := vmiIn(phase)
		vmi.Name = "vmi"
		for _, c := range conds {
			vmi.Status.Conditions = append(vmi.Status.Conditions, v1.VirtualMachineInstanceCondition{Type: c, Status: corev1.ConditionTrue})
		}
		return vmi
	}
	noACPI := with(v1.Running)
	noACPI.Spec.Domain.Features = &v1.Features{ACPI: v1.FeatureState{Enabled: ptr.To(false)}}
	probed := with(v1.Running, v1.VirtualMachineInstanceAgentConnected)
	probed.Spec.LivenessProbe = &v1.Probe{}
	agent, paused := v1.VirtualMachineInstanceAgentConnected, v1.VirtualMachineInstancePaused
	tests := []struct {
		op   string
		vmi  *v1.VirtualMachineInstance
		want string // "" allowed
	}{
		{"pause", with(v1.Running), ""},
		{"pause", with(v1.Scheduled), "VMI is not running"},
		{"pause", with(v1.Running, paused), "VMI is already paused"},
		{"pause", probed, "with LivenessProbe is currently not supported"},
		{"unpause", with(v1.Running, paused), ""},
		{"unpause", with(v1.Running), "VMI is not paused"},
		{"softreboot", with(v1.Running), ""},
		{"softreboot", with(v1.Running, paused), "VMI is paused"},
		{"softreboot", noACPI, "neither have the agent connected nor the ACPI feature enabled"},
		{"guestosinfo", with(v1.Running, agent), ""},
		{"guestosinfo", with(v1.Running), "VMI does not have guest agent connected"},
		{"userlist", with(v1.Succeeded, agent), "VMI is not running"},
		{"freeze", with(v1.Running), "guest agent connected"},
	}
	for _, tt := range tests {
		err := validateOp(tt.op, tt.vmi)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s on %+v: %v, want allowed", tt.op, tt.vmi.Status, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s on %+v: %v, want %q", tt.op, tt.vmi.Status, err, tt.want)
		}
	}
}
