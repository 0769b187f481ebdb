package subresources

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
)

func vmWith(rs v1.VirtualMachineRunStrategy, reqs ...v1.VirtualMachineStateChangeRequest) *v1.VirtualMachine {
	vm := &v1.VirtualMachine{Spec: v1.VirtualMachineSpec{RunStrategy: &rs}}
	vm.Name = "vm"
	vm.Status.StateChangeRequests = reqs
	return vm
}

func vmiIn(phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: phase}}
	vmi.UID = types.UID("uid-" + string(phase))
	return vmi
}

// actions lists a change's requests as "Stop(uid) Start".
func actions(reqs []v1.VirtualMachineStateChangeRequest) string {
	var out []string
	for _, r := range reqs {
		s := string(r.Action)
		if r.UID != nil {
			s += "(" + string(*r.UID) + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// outcome is a plan's result in one line: the run strategy set, the
// requests, the grace period, or the error's code and message.
func outcome(c change, err error) string {
	if err != nil {
		return fmt.Sprintf("error %s: %v", apierrors.ReasonForError(err), err)
	}
	var out []string
	if c.runStrategy != nil {
		out = append(out, "runStrategy "+string(*c.runStrategy))
	}
	if c.requests != nil {
		out = append(out, "requests "+actions(c.requests))
	}
	if c.grace != nil {
		out = append(out, fmt.Sprintf("grace %d", *c.grace))
	}
	return strings.Join(out, ", ")
}

func TestPlanStart(t *testing.T) {
	pending := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	tests := []struct {
		name string
		vm   *v1.VirtualMachine
		vmi  *v1.VirtualMachineInstance
		opts v1.StartOptions
		want string
	}{
		{"halted", vmWith(v1.RunStrategyHalted), nil, v1.StartOptions{}, "runStrategy Always"},
		{"manual, no VMI", vmWith(v1.RunStrategyManual), nil, v1.StartOptions{}, "requests Start"},
		{"manual, VMI ended", vmWith(v1.RunStrategyManual), vmiIn(v1.Succeeded), v1.StartOptions{}, "requests Stop(uid-Succeeded) Start"},
		{"rerun, VMI succeeded", vmWith(v1.RunStrategyRerunOnFailure), vmiIn(v1.Succeeded), v1.StartOptions{}, "requests Stop(uid-Succeeded) Start"},
		{"rerun, VMI failed", vmWith(v1.RunStrategyRerunOnFailure), vmiIn(v1.Failed), v1.StartOptions{}, "RerunOnFailure does not support starting VM from failed state"},
		{"always", vmWith(v1.RunStrategyAlways), nil, v1.StartOptions{}, "Always does not support manual start requests"},
		{"once", vmWith(v1.RunStrategyOnce), vmiIn(v1.Succeeded), v1.StartOptions{}, "Once does not support manual start requests"},
		{"running", vmWith(v1.RunStrategyManual), vmiIn(v1.Running), v1.StartOptions{}, "VM is already running"},
		{"manual, a start underway", vmWith(v1.RunStrategyManual, pending), nil, v1.StartOptions{}, "stop/start already underway"},
		{"paused", vmWith(v1.RunStrategyHalted), nil, v1.StartOptions{Paused: true}, "spec.startStrategy Paused"},
	}
	for _, tt := range tests {
		c, err := planStart(tt.vm, tt.vmi, &tt.opts)
		if got := outcome(c, err); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %s; want %q", tt.name, got, tt.want)
		}
	}
	if _, err := planStart(vmWith(v1.RunStrategyAlways), nil, &v1.StartOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("start of an Always VM: %v, want a Conflict", err)
	}
	running := true
	legacy := &v1.VirtualMachine{Spec: v1.VirtualMachineSpec{Running: &running}}
	if _, err := planStart(legacy, vmiIn(v1.Scheduling), &v1.StartOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "already running") {
		t.Errorf("start of a running legacy VM: %v", err)
	}
}

func TestPlanStop(t *testing.T) {
	startPending := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	halted := vmiIn(v1.Running)
	halted.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	tests := []struct {
		name string
		vm   *v1.VirtualMachine
		vmi  *v1.VirtualMachineInstance
		opts v1.StopOptions
		want string
	}{
		{"always", vmWith(v1.RunStrategyAlways), vmiIn(v1.Running), v1.StopOptions{}, "runStrategy Halted"},
		{"always, grace 0", vmWith(v1.RunStrategyAlways), vmiIn(v1.Running), v1.StopOptions{GracePeriod: ptr.To[int64](0)}, "runStrategy Halted, grace 0"},
		{"once", vmWith(v1.RunStrategyOnce), vmiIn(v1.Running), v1.StopOptions{}, "runStrategy Halted"},
		{"manual", vmWith(v1.RunStrategyManual), vmiIn(v1.Running), v1.StopOptions{}, "requests Stop(uid-Running)"},
		{"manual, replaces a pending start", vmWith(v1.RunStrategyManual, startPending), vmiIn(v1.Running), v1.StopOptions{}, "requests Stop(uid-Running)"},
		{"rerun", vmWith(v1.RunStrategyRerunOnFailure), vmiIn(v1.Running), v1.StopOptions{}, "requests Stop(uid-Running)"},
		{"manual, not running", vmWith(v1.RunStrategyManual), nil, v1.StopOptions{}, "VM is not running"},
		{"manual, ended", vmWith(v1.RunStrategyManual), vmiIn(v1.Failed), v1.StopOptions{}, "VM is not running"},
		{"halted, stopped", vmWith(v1.RunStrategyHalted), nil, v1.StopOptions{}, "VM is not running"},
		{"halted, stopping, no grace", vmWith(v1.RunStrategyHalted), halted, v1.StopOptions{}, "Halted only supports manual stop requests with a shorter graceperiod"},
		{"halted, stopping, longer grace", vmWith(v1.RunStrategyHalted), halted, v1.StopOptions{GracePeriod: ptr.To[int64](9)}, "shorter graceperiod"},
		{"halted, stopping, shorter grace", vmWith(v1.RunStrategyHalted), halted, v1.StopOptions{GracePeriod: ptr.To[int64](1)}, "requests Stop(uid-Running), grace 1"},
		{"negative grace", vmWith(v1.RunStrategyAlways), vmiIn(v1.Running), v1.StopOptions{GracePeriod: ptr.To[int64](-1)}, "greater or equal to 0"},
	}
	for _, tt := range tests {
		c, err := planStop(tt.vm, tt.vmi, &tt.opts)
		if got := outcome(c, err); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %s; want %q", tt.name, got, tt.want)
		}
	}
}

func TestPlanRestart(t *testing.T) {
	tests := []struct {
		name string
		vm   *v1.VirtualMachine
		vmi  *v1.VirtualMachineInstance
		opts v1.RestartOptions
		want string
	}{
		{"always", vmWith(v1.RunStrategyAlways), vmiIn(v1.Running), v1.RestartOptions{}, "requests Stop(uid-Running) Start"},
		{"manual", vmWith(v1.RunStrategyManual), vmiIn(v1.Running), v1.RestartOptions{}, "requests Stop(uid-Running) Start"},
		{"rerun, ended", vmWith(v1.RunStrategyRerunOnFailure), vmiIn(v1.Succeeded), v1.RestartOptions{}, "requests Stop(uid-Succeeded) Start"},
		{"forced", vmWith(v1.RunStrategyAlways), vmiIn(v1.Running), v1.RestartOptions{GracePeriodSeconds: ptr.To[int64](0)}, "requests Stop(uid-Running) Start, grace 0"},
		{"grace 5", vmWith(v1.RunStrategyAlways), vmiIn(v1.Running), v1.RestartOptions{GracePeriodSeconds: ptr.To[int64](5)}, "only gracePeriod=0 is supported"},
		{"halted", vmWith(v1.RunStrategyHalted), nil, v1.RestartOptions{}, "RunStategy Halted does not support manual restart requests"},
		{"once", vmWith(v1.RunStrategyOnce), vmiIn(v1.Running), v1.RestartOptions{}, "RunStategy Once does not support manual restart requests"},
		{"no VMI", vmWith(v1.RunStrategyManual), nil, v1.RestartOptions{}, "VM is not running"},
		{"underway", vmWith(v1.RunStrategyAlways, v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}), vmiIn(v1.Running), v1.RestartOptions{}, "already underway"},
	}
	for _, tt := range tests {
		c, err := planRestart(tt.vm, tt.vmi, &tt.opts)
		if got := outcome(c, err); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %s; want %q", tt.name, got, tt.want)
		}
	}
}
