package subresources

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

// TestExpandVMSpec: a VM tekvirt supports comes back as sent (nothing to
// expand); one naming an instancetype comes back sized by it, without the
// matcher; a missing instancetype is a 422 naming it; an unknown field,
// another namespace or no body is a 400 saying which; bob may not.
func TestExpandVMSpec(t *testing.T) {
	a, _ := testAPI(t)
	path := "/apis/subresources.kubevirt.io/v1/namespaces/ns/expand-vm-spec"
	vm := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"x"},"spec":{"runStrategy":"Halted",` +
		`"template":{"spec":{"domain":{"devices":{}},"terminationGracePeriodSeconds":5}}}}`
	w := serve(t, a, http.MethodPut, path, "alice", vm)
	got := &v1.VirtualMachine{}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), got) != nil || got.Name != "x" || got.Kind != "VirtualMachine" ||
		got.Spec.Template == nil || *got.Spec.Template.Spec.TerminationGracePeriodSeconds != 5 {
		t.Errorf("expand-vm-spec: %d %s", w.Code, w.Body)
	}
	w = serve(t, a, http.MethodPut, path, "alice", strings.Replace(vm, `"runStrategy"`, `"instancetype":{"name":"u1.small"},"runStrategy"`, 1))
	got = &v1.VirtualMachine{}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), got) != nil || got.Spec.Instancetype != nil ||
		got.Spec.Template.Spec.Domain.CPU == nil || got.Spec.Template.Spec.Domain.CPU.Sockets != 1 || got.Spec.Template.Spec.Domain.Memory.Guest.String() != "2Gi" {
		t.Errorf("expand-vm-spec with an instancetype: %d %s", w.Code, w.Body)
	}
	w = serve(t, a, http.MethodPut, path, "alice", strings.Replace(vm, `"runStrategy"`, `"instancetype":{"name":"u9.huge"},"runStrategy"`, 1))
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "VirtualMachineClusterInstancetype u9.huge not found") {
		t.Errorf("expand-vm-spec with a missing instancetype: %d %s", w.Code, w.Body)
	}
	for name, tc := range map[string]struct{ body, want string }{
		"inferred instancetype": {strings.Replace(vm, `"runStrategy"`, `"instancetype":{"inferFromVolume":"root"},"runStrategy"`, 1), "spec.instancetype.inferFromVolume"},
		"unknown field":         {strings.Replace(vm, `"metadata"`, `"bogus":1,"metadata"`, 1), "bogus"},
		"other namespace":       {strings.Replace(vm, `"name":"x"`, `"name":"x","namespace":"other"`, 1), "namespace"},
		"no body":               {"", "empty request body"},
		"not JSON":              {"{", "unmarshal"},
	} {
		w := serve(t, a, http.MethodPut, path, "alice", tc.body)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", name, w.Code, w.Body, tc.want)
		}
	}
	if w := serve(t, a, http.MethodPut, path, "bob", vm); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"expand-vm-spec"`) {
		t.Errorf("bob: %d %s, want 403 naming expand-vm-spec", w.Code, w.Body)
	}

	w = serve(t, a, http.MethodGet, "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/halted/expand-spec", "alice", "")
	got = &v1.VirtualMachine{}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), got) != nil || got.Name != "halted" {
		t.Errorf("expand-spec: %d %s", w.Code, w.Body)
	}
}
