package vmwebhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// TestSnapshotAdmission: a VM snapshot of anything but a VM, and a restore
// tekvirt cannot do, are refused at once naming the field; neither's spec
// changes afterwards.
func TestSnapshotAdmission(t *testing.T) {
	v := Validator{}
	ctx := context.Background()
	vm := "{apiGroup: kubevirt.io, kind: VirtualMachine, name: vm}"
	for _, tc := range []struct{ name, kind, spec, want string }{
		{"a VM snapshot", "VirtualMachineSnapshot", "{source: " + vm + "}", ""},
		{"a Pod snapshot", "VirtualMachineSnapshot", "{source: {kind: Pod, name: p}}", "spec.source: Pod p of group"},
		{"a VM of another group", "VirtualMachineSnapshot", "{source: {apiGroup: example.com, kind: VirtualMachine, name: vm}}", "spec.source:"},
		{"a restore", "VirtualMachineRestore", "{target: " + vm + ", virtualMachineSnapshotName: s, volumeRestorePolicy: PrefixTargetName}", ""},
		{"a restore with patches", "VirtualMachineRestore", "{target: " + vm + ", virtualMachineSnapshotName: s, patches: ['{\"op\":\"remove\",\"path\":\"/spec/running\"}']}", ""},
		{"a restore into a Pod", "VirtualMachineRestore", "{target: {kind: Pod, name: p}, virtualMachineSnapshotName: s}", "spec.target: Pod p"},
		{"a restore in place", "VirtualMachineRestore", "{target: " + vm + ", virtualMachineSnapshotName: s, volumeRestorePolicy: InPlace}", `spec.volumeRestorePolicy "InPlace" is not supported`},
		{"a restore without a snapshot", "VirtualMachineRestore", "{target: " + vm + "}", "spec.virtualMachineSnapshotName are required"},
	} {
		r := v.Handle(ctx, request(t, tc.kind, admissionv1.Create, "metadata: {name: x}\nspec: "+tc.spec+"\n"))
		switch {
		case tc.want == "" && !r.Allowed:
			t.Errorf("%s: denied: %s", tc.name, r.Result.Message)
		case tc.want != "" && (r.Allowed || !strings.Contains(r.Result.Message, tc.want)):
			t.Errorf("%s: allowed %v, %q; want refused naming %q", tc.name, r.Allowed, r.Result.Message, tc.want)
		}
	}
	for _, kind := range []string{"VirtualMachineSnapshot", "VirtualMachineRestore"} {
		update := request(t, kind, admissionv1.Update, "metadata: {name: x, finalizers: [f]}\nspec: {source: "+vm+"}\n")
		update.OldObject = request(t, kind, admissionv1.Update, "metadata: {name: x}\nspec: {source: "+vm+"}\n").Object
		if r := v.Handle(ctx, update); !r.Allowed {
			t.Errorf("%s: a finalizer added (the controller's): %s", kind, r.Result.Message)
		}
		update.Object = request(t, kind, admissionv1.Update, "metadata: {name: x}\nspec: {source: {apiGroup: kubevirt.io, kind: VirtualMachine, name: other}}\n").Object
		if r := v.Handle(ctx, update); r.Allowed || !strings.Contains(r.Result.Message, "spec.source") {
			t.Errorf("%s: a changed spec: allowed %v, %q", kind, r.Allowed, r.Result.Message)
		}
	}
}
