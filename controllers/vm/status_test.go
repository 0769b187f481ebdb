package vm

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
)

func vmiIn(phase v1.VirtualMachineInstancePhase) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: phase}}
}

func TestDecide(t *testing.T) {
	deleting := vmiIn(v1.Running)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	running := vmiIn(v1.Running)
	running.UID = "run-1"
	other := types.UID("old-0")
	start := []v1.VirtualMachineStateChangeRequest{{Action: v1.StartRequest}}
	stopIt := []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: &running.UID}, {Action: v1.StartRequest}}
	stopOther := []v1.VirtualMachineStateChangeRequest{{Action: v1.StopRequest, UID: &other}}
	tests := []struct {
		rs     v1.VirtualMachineRunStrategy
		lastRS v1.VirtualMachineRunStrategy // status.runStrategy
		reqs   []v1.VirtualMachineStateChangeRequest
		vmi    *v1.VirtualMachineInstance
		want   action
	}{
		{v1.RunStrategyAlways, "", nil, nil, actCreate},
		{v1.RunStrategyAlways, "", nil, vmiIn(v1.Running), actNone},
		{v1.RunStrategyAlways, "", nil, vmiIn(v1.Succeeded), actDelete},
		{v1.RunStrategyAlways, "", nil, vmiIn(v1.Failed), actDelete},
		{v1.RunStrategyAlways, "", nil, deleting, actNone},
		{v1.RunStrategyAlways, "", stopIt, running, actDelete}, // restart
		{v1.RunStrategyAlways, "", stopOther, running, actNone},
		{v1.RunStrategyRerunOnFailure, "", nil, nil, actCreate},
		{v1.RunStrategyRerunOnFailure, v1.RunStrategyRerunOnFailure, nil, nil, actNone},
		{v1.RunStrategyRerunOnFailure, v1.RunStrategyRerunOnFailure, start, nil, actCreate},
		{v1.RunStrategyRerunOnFailure, v1.RunStrategyHalted, nil, nil, actCreate},
		{v1.RunStrategyRerunOnFailure, "", nil, vmiIn(v1.Failed), actDelete},
		{v1.RunStrategyRerunOnFailure, "", nil, vmiIn(v1.Succeeded), actDelete},
		{v1.RunStrategyRerunOnFailure, "", nil, vmiIn(v1.Running), actNone},
		{v1.RunStrategyRerunOnFailure, "", stopIt, running, actDelete},
		{v1.RunStrategyOnce, "", nil, nil, actCreate},
		{v1.RunStrategyOnce, "", nil, vmiIn(v1.Running), actNone},
		{v1.RunStrategyOnce, "", nil, vmiIn(v1.Succeeded), actHalt},
		{v1.RunStrategyOnce, "", nil, vmiIn(v1.Failed), actHalt},
		{v1.RunStrategyHalted, "", nil, nil, actNone},
		{v1.RunStrategyHalted, "", nil, vmiIn(v1.Running), actDelete},
		{v1.RunStrategyHalted, "", nil, deleting, actNone},
		{v1.RunStrategyManual, "", nil, nil, actNone},
		{v1.RunStrategyManual, "", nil, vmiIn(v1.Failed), actNone},
		{v1.RunStrategyManual, "", start, nil, actCreate},
		{v1.RunStrategyManual, "", start, running, actNone},
		{v1.RunStrategyManual, "", stopIt, running, actDelete},
		{v1.RunStrategyManual, "", stopOther, running, actNone},
	}
	for _, tt := range tests {
		vm := &v1.VirtualMachine{Status: v1.VirtualMachineStatus{RunStrategy: tt.lastRS, StateChangeRequests: tt.reqs}}
		got, err := decide(vm, tt.rs, tt.vmi)
		if err != nil || got != tt.want {
			phase := "none"
			if tt.vmi != nil {
				phase = string(tt.vmi.Status.Phase)
			}
			t.Errorf("decide(%s after %q, requests %v, VMI %s) = %v, %v; want %v", tt.rs, tt.lastRS, tt.reqs, phase, got, err, tt.want)
		}
	}
	restoring := &v1.VirtualMachine{Status: v1.VirtualMachineStatus{RestoreInProgress: ptr.To("r1")}}
	if got, _ := decide(restoring, v1.RunStrategyAlways, nil); got != actNone {
		t.Errorf("decide(Always, restore in progress, no VMI) = %v; want none: a VM being restored does not start", got)
	}
	if got, _ := decide(restoring, v1.RunStrategyHalted, vmiIn(v1.Running)); got != actDelete {
		t.Errorf("decide(Halted, restore in progress, VMI running) = %v; want delete (StopTarget stops it)", got)
	}
	if _, err := decide(&v1.VirtualMachine{}, "Sometimes", nil); err == nil {
		t.Error("unknown run strategy accepted")
	}
}

func TestDoneRequests(t *testing.T) {
	vmi := vmiIn(v1.Running)
	vmi.UID = "new-1"
	old := types.UID("old-0")
	failed := vmiIn(v1.Failed)
	failed.UID = old
	stopOld := v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest, UID: &old}
	stopAny := v1.VirtualMachineStateChangeRequest{Action: v1.StopRequest}
	start := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	tests := []struct {
		name string
		reqs []v1.VirtualMachineStateChangeRequest
		vmi  *v1.VirtualMachineInstance
		want int // requests left
	}{
		{"restart: the old VMI still there", []v1.VirtualMachineStateChangeRequest{stopOld, start}, failed, 2},
		{"restart: the old VMI gone", []v1.VirtualMachineStateChangeRequest{stopOld, start}, nil, 1},
		{"restart: the new VMI created", []v1.VirtualMachineStateChangeRequest{stopOld, start}, vmi, 0},
		{"stop of any VMI, one runs", []v1.VirtualMachineStateChangeRequest{stopAny}, vmi, 1},
		{"stop of any VMI, none runs", []v1.VirtualMachineStateChangeRequest{stopAny}, nil, 0},
		{"start after a failure, the failed VMI still there", []v1.VirtualMachineStateChangeRequest{start}, failed, 1},
		{"unknown action", []v1.VirtualMachineStateChangeRequest{{Action: "Migrate"}, start}, nil, 1},
		{"none", nil, vmi, 0},
	}
	for _, tt := range tests {
		if got := doneRequests(tt.reqs, tt.vmi); len(got) != tt.want {
			t.Errorf("%s: %d requests left (%v), want %d", tt.name, len(got), got, tt.want)
		}
	}
}

func TestPrintableStatus(t *testing.T) {
	paused := vmiIn(v1.Running)
	paused.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
	stopping := vmiIn(v1.Running)
	stopping.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	terminating := &v1.VirtualMachine{}
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	tests := []struct {
		name string
		vm   *v1.VirtualMachine
		rs   v1.VirtualMachineRunStrategy
		vmi  *v1.VirtualMachineInstance
		want v1.VirtualMachinePrintableStatus
	}{
		{"halted, no vmi", &v1.VirtualMachine{}, v1.RunStrategyHalted, nil, v1.VirtualMachineStatusStopped},
		{"always, no vmi yet", &v1.VirtualMachine{}, v1.RunStrategyAlways, nil, v1.VirtualMachineStatusStarting},
		{"vmi without phase", &v1.VirtualMachine{}, v1.RunStrategyAlways, vmiIn(""), v1.VirtualMachineStatusStarting},
		{"scheduled", &v1.VirtualMachine{}, v1.RunStrategyAlways, vmiIn(v1.Scheduled), v1.VirtualMachineStatusStarting},
		{"running", &v1.VirtualMachine{}, v1.RunStrategyAlways, vmiIn(v1.Running), v1.VirtualMachineStatusRunning},
		{"paused", &v1.VirtualMachine{}, v1.RunStrategyAlways, paused, v1.VirtualMachineStatusPaused},
		{"stopping", &v1.VirtualMachine{}, v1.RunStrategyHalted, stopping, v1.VirtualMachineStatusStopping},
		{"succeeded", &v1.VirtualMachine{}, v1.RunStrategyOnce, vmiIn(v1.Succeeded), v1.VirtualMachineStatusStopped},
		{"unknown", &v1.VirtualMachine{}, v1.RunStrategyAlways, vmiIn(v1.Unknown), v1.VirtualMachineStatusUnknown},
		{"vm deleting", terminating, v1.RunStrategyAlways, vmiIn(v1.Running), v1.VirtualMachineStatusTerminating},
	}
	for _, tt := range tests {
		if got := printableStatus(tt.vm, tt.rs, tt.vmi, metav1.Now()); got != tt.want {
			t.Errorf("%s: printableStatus = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestSetStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	vm := &v1.VirtualMachine{}
	vm.Generation = 3
	setStatus(vm, v1.RunStrategyAlways, nil, nil, t0)
	if vm.Status.Created || vm.Status.Ready || vm.Status.ObservedGeneration != 3 || vm.Status.RunStrategy != v1.RunStrategyAlways {
		t.Fatalf("status without vmi = %+v", vm.Status)
	}
	ready := vmiIn(v1.Running)
	ready.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, Reason: "AgentConnected"}}
	setStatus(vm, v1.RunStrategyAlways, ready, nil, t1)
	c := vm.Status.Conditions[0]
	if !vm.Status.Created || !vm.Status.Ready || c.Status != corev1.ConditionTrue || c.Reason != "AgentConnected" || !c.LastTransitionTime.Equal(&t1) {
		t.Fatalf("status with a ready vmi = %+v", vm.Status)
	}
	setStatus(vm, v1.RunStrategyAlways, ready, errors.New("boom"), metav1.NewTime(time.Unix(3000, 0)))
	if len(vm.Status.Conditions) != 2 || vm.Status.Conditions[1].Type != v1.VirtualMachineFailure || vm.Status.Conditions[1].Message != "boom" {
		t.Fatalf("failure not reported: %+v", vm.Status.Conditions)
	}
	if !vm.Status.Conditions[0].LastTransitionTime.Equal(&t1) {
		t.Fatal("Ready transition time moved though its status did not change")
	}
	setStatus(vm, v1.RunStrategyAlways, ready, nil, t1)
	if len(vm.Status.Conditions) != 1 {
		t.Fatalf("failure condition not cleared: %+v", vm.Status.Conditions)
	}
}

func TestStartBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 7: 5 * time.Minute, 30: 5 * time.Minute} {
		if got := startBackoff(n); got != want {
			t.Errorf("startBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestRecordStartFailure(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	var st v1.VirtualMachineStatus
	failed := func(uid string) *v1.VirtualMachineInstance {
		return &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Failed}}
	}
	recordStartFailure(&st, failed("a"), now)
	recordStartFailure(&st, failed("a"), now) // the same VMI seen twice counts once
	if st.StartFailure.ConsecutiveFailCount != 1 || retryWait(&st, now) != 5*time.Second {
		t.Fatalf("after one failure: %+v, wait %s", st.StartFailure, retryWait(&st, now))
	}
	recordStartFailure(&st, failed("b"), now)
	if st.StartFailure.ConsecutiveFailCount != 2 || retryWait(&st, now) != 10*time.Second {
		t.Fatalf("after two failures: %+v", st.StartFailure)
	}
	vm := &v1.VirtualMachine{Status: st}
	if got := printableStatus(vm, v1.RunStrategyAlways, nil, now); got != v1.VirtualMachineStatusCrashLoopBackOff {
		t.Errorf("waiting to retry: printableStatus %s, want CrashLoopBackOff", got)
	}
	later := metav1.NewTime(now.Add(11 * time.Second))
	if got := printableStatus(vm, v1.RunStrategyAlways, nil, later); got != v1.VirtualMachineStatusStarting || retryWait(&vm.Status, later) != 0 {
		t.Errorf("after the backoff: printableStatus %s, wait %s", got, retryWait(&vm.Status, later))
	}
	running := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: []v1.VirtualMachineInstanceCondition{
		{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}}}
	setStatus(vm, v1.RunStrategyAlways, running, nil, later)
	if vm.Status.StartFailure != nil {
		t.Errorf("a Ready VMI did not reset the failures: %+v", vm.Status.StartFailure)
	}
}

func TestPausedConditionMirrorsTheVMI(t *testing.T) {
	now := metav1.Now()
	vm := &v1.VirtualMachine{}
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: []v1.VirtualMachineInstanceCondition{
		{Type: v1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue, Reason: "PausedByUser"}}}}
	setStatus(vm, v1.RunStrategyAlways, vmi, nil, now)
	var paused *v1.VirtualMachineCondition
	for i := range vm.Status.Conditions {
		if vm.Status.Conditions[i].Type == v1.VirtualMachinePaused {
			paused = &vm.Status.Conditions[i]
		}
	}
	if paused == nil || paused.Status != corev1.ConditionTrue || paused.Reason != "PausedByUser" || vm.Status.PrintableStatus != v1.VirtualMachineStatusPaused {
		t.Fatalf("paused VMI: conditions %+v, printable %s", vm.Status.Conditions, vm.Status.PrintableStatus)
	}
	vmi.Status.Conditions = nil
	setStatus(vm, v1.RunStrategyAlways, vmi, nil, now)
	for _, c := range vm.Status.Conditions {
		if c.Type == v1.VirtualMachinePaused {
			t.Fatalf("Paused condition kept after unpause: %+v", c)
		}
	}
}

// TestVMIConditionsMirrored: every VMI condition but Ready reaches the VM
// (a refused launcher Pod's Synchronized=False FailedCreate among them),
// and goes when the VMI no longer has it or is gone.
func TestVMIConditionsMirrored(t *testing.T) {
	now := metav1.Now()
	vm := &v1.VirtualMachine{}
	refused := v1.VirtualMachineInstanceCondition{Type: v1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
		Reason: "FailedCreate", Message: `failed to create virtual machine pod: pods "virt-launcher-a" is forbidden: violates PodSecurity`}
	vmi := &v1.VirtualMachineInstance{Status: v1.VirtualMachineInstanceStatus{Phase: v1.Pending, Conditions: []v1.VirtualMachineInstanceCondition{
		refused, {Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: "NotReady"}}}}
	types := func() map[v1.VirtualMachineConditionType]v1.VirtualMachineCondition {
		out := map[v1.VirtualMachineConditionType]v1.VirtualMachineCondition{}
		for _, c := range vm.Status.Conditions {
			if _, twice := out[c.Type]; twice {
				t.Errorf("condition %s twice: %+v", c.Type, vm.Status.Conditions)
			}
			out[c.Type] = c
		}
		return out
	}
	setStatus(vm, v1.RunStrategyAlways, vmi, nil, now)
	got := types()
	if c := got[v1.VirtualMachineConditionType(v1.VirtualMachineInstanceSynchronized)]; c.Status != corev1.ConditionFalse || c.Reason != refused.Reason || c.Message != refused.Message {
		t.Errorf("Synchronized on the VM = %+v, want the VMI's %+v", c, refused)
	}
	if c := got[v1.VirtualMachineReady]; c.Reason != "NotReady" || vm.Status.PrintableStatus != v1.VirtualMachineStatusStarting {
		t.Errorf("Ready %+v, printableStatus %s; want the VMI's Ready, Starting", c, vm.Status.PrintableStatus)
	}
	vmi.Status.Conditions = vmi.Status.Conditions[1:]
	setStatus(vm, v1.RunStrategyAlways, vmi, nil, now)
	if _, ok := types()[v1.VirtualMachineConditionType(v1.VirtualMachineInstanceSynchronized)]; ok {
		t.Errorf("Synchronized kept after the VMI dropped it: %+v", vm.Status.Conditions)
	}
	vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{refused}
	setStatus(vm, v1.RunStrategyAlways, vmi, nil, now)
	setStatus(vm, v1.RunStrategyAlways, nil, nil, now)
	if got := types(); len(got) != 1 || got[v1.VirtualMachineReady].Reason != "VMINotExists" {
		t.Errorf("without a VMI the VM has %+v, want Ready only", vm.Status.Conditions)
	}
}

func TestNoteFailure(t *testing.T) {
	start := v1.VirtualMachineStateChangeRequest{Action: v1.StartRequest}
	tests := []struct {
		rs        v1.VirtualMachineRunStrategy
		phase     v1.VirtualMachineInstancePhase
		reqs      []v1.VirtualMachineStateChangeRequest
		changed   bool
		wantStart int // start requests after
	}{
		{v1.RunStrategyRerunOnFailure, v1.Failed, nil, true, 1},
		{v1.RunStrategyRerunOnFailure, v1.Failed, []v1.VirtualMachineStateChangeRequest{start}, true, 1},
		{v1.RunStrategyRerunOnFailure, v1.Succeeded, nil, false, 0},
		{v1.RunStrategyAlways, v1.Failed, nil, true, 0},
		{v1.RunStrategyAlways, v1.Running, nil, false, 0},
	}
	for _, tt := range tests {
		vm := &v1.VirtualMachine{Status: v1.VirtualMachineStatus{StateChangeRequests: tt.reqs}}
		vmi := vmiIn(tt.phase)
		vmi.UID = "vmi-1"
		changed := noteFailure(vm, tt.rs, vmi, metav1.Now())
		starts := 0
		for _, r := range vm.Status.StateChangeRequests {
			if r.Action == v1.StartRequest {
				starts++
			}
		}
		if changed != tt.changed || starts != tt.wantStart {
			t.Errorf("%s, VMI %s: changed %v with %d start requests, want %v with %d", tt.rs, tt.phase, changed, starts, tt.changed, tt.wantStart)
		}
		if counted := vm.Status.StartFailure != nil; counted != (tt.phase == v1.Failed) {
			t.Errorf("%s, VMI %s: failure counted %v", tt.rs, tt.phase, counted)
		}
	}
}
