package vmwebhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestMigrationAdmission: a migration is refused at once, naming why, as
// KubeVirt refuses it: a VMI that does not exist, has ended, cannot
// migrate, or migrates already; fields tekvirt does not implement; a
// changed spec.
func TestMigrationAdmission(t *testing.T) {
	s := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	vmi := func(name string, phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceCondition) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, Conditions: conds}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		vmi("running", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}),
		vmi("ended", kubevirtv1.Succeeded),
		vmi("pinned", kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
			Reason: kubevirtv1.VirtualMachineInstanceReasonDisksNotMigratable, Message: "cannot migrate VMI: PVC disk is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"}),
		vmi("busy", kubevirtv1.Running),
		&kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "first"},
			Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "busy"}, Status: kubevirtv1.VirtualMachineInstanceMigrationStatus{Phase: kubevirtv1.MigrationRunning}},
		&kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old"},
			Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "running"}, Status: kubevirtv1.VirtualMachineInstanceMigrationStatus{Phase: kubevirtv1.MigrationSucceeded}},
	).Build()
	v := Validator{Client: c}
	ctx := context.Background()
	for _, tc := range []struct{ name, spec, want string }{
		{"running, migratable", "{vmiName: running}", ""},
		{"with an added node selector", "{vmiName: running, addedNodeSelector: {zone: b}}", ""},
		{"no VMI named", "{}", "spec.vmiName is required"},
		{"a missing VMI", "{vmiName: nothere}", `the VMI "nothere" does not exist in namespace ns`},
		{"an ended VMI", "{vmiName: ended}", "it has ended (Succeeded)"},
		{"a VMI that cannot migrate", "{vmiName: pinned}", "Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI: PVC disk is not shared"},
		{"a VMI migrating already", "{vmiName: busy}", "migration first is in flight"},
		{"a decentralized migration", "{vmiName: running, sendTo: {migrationID: x, connectURL: https://other}}", "spec.sendTo is not supported"},
		{"a priority", "{vmiName: running, priority: user-triggered}", "spec.priority is not supported"},
	} {
		req := request(t, "VirtualMachineInstanceMigration", admissionv1.Create, "metadata: {name: m}\nspec: "+tc.spec+"\n")
		req.Namespace = "ns"
		r := v.Handle(ctx, req)
		switch {
		case tc.want == "" && !r.Allowed:
			t.Errorf("%s: denied: %s", tc.name, r.Result.Message)
		case tc.want != "" && (r.Allowed || !strings.Contains(r.Result.Message, tc.want)):
			t.Errorf("%s: allowed %v, %q; want refused naming %q", tc.name, r.Allowed, r.Result.Message, tc.want)
		}
	}
	update := request(t, "VirtualMachineInstanceMigration", admissionv1.Update, "metadata: {name: m, labels: {a: b}}\nspec: {vmiName: running}\n")
	update.OldObject = request(t, "VirtualMachineInstanceMigration", admissionv1.Update, "metadata: {name: m}\nspec: {vmiName: running}\n").Object
	if r := v.Handle(ctx, update); !r.Allowed {
		t.Errorf("a label added to a migration (the controller's): %s", r.Result.Message)
	}
	update.Object = request(t, "VirtualMachineInstanceMigration", admissionv1.Update, "metadata: {name: m}\nspec: {vmiName: pinned}\n").Object
	if r := v.Handle(ctx, update); r.Allowed || !strings.Contains(r.Result.Message, "spec.vmiName of VirtualMachineInstanceMigration") {
		t.Errorf("a migration's spec changed: %+v", r.Result)
	}
}
