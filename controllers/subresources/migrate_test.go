package subresources

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

// TestMigrate: virtualmachines/migrate, as virtctl migrate calls it, makes
// a migration of the VM's running VMI with the options' addedNodeSelector;
// a caller without the right, a VM that does not run and a dry run make
// none.
func TestMigrate(t *testing.T) {
	a, c := testAPI(t)
	path := func(vm string) string {
		return "/apis/" + groupVersion + "/namespaces/ns/virtualmachines/" + vm + "/migrate"
	}
	count := func() []v1.VirtualMachineInstanceMigration {
		t.Helper()
		list := &v1.VirtualMachineInstanceMigrationList{}
		if err := c.List(context.Background(), list, client.InNamespace("ns")); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	for _, tc := range []struct {
		name, vm, user, body string
		code                 int
		want                 string
	}{
		{"no right", "manual", "bob", "{}", http.StatusForbidden, `cannot update resource \"virtualmachines/migrate\"`},
		{"not running", "halted", "alice", "{}", http.StatusConflict, "VM is not running"},
		{"missing VM", "nothere", "alice", "{}", http.StatusNotFound, "nothere"},
		{"malformed", "manual", "alice", "{bad", http.StatusBadRequest, ""},
		{"dry run", "manual", "alice", `{"dryRun":["All"]}`, http.StatusAccepted, ""},
	} {
		if w := serve(t, a, http.MethodPut, path(tc.vm), tc.user, tc.body); w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, w.Code, w.Body, tc.code, tc.want)
		}
	}
	if got := count(); len(got) != 0 {
		t.Fatalf("refused and dry-run requests made migrations: %v", got)
	}
	if w := serve(t, a, http.MethodPut, path("manual"), "alice", `{"addedNodeSelector":{"zone":"b"}}`); w.Code != http.StatusAccepted {
		t.Fatalf("migrate: %d %s", w.Code, w.Body)
	}
	got := count()
	if len(got) != 1 || got[0].Spec.VMIName != "manual" || got[0].Spec.AddedNodeSelector["zone"] != "b" || !strings.HasPrefix(got[0].GenerateName, "kubevirt-migrate-vm-") ||
		got[0].Labels[v1.MigrationSelectorLabel] != "manual" {
		t.Errorf("migration made: %+v", got)
	}
}
