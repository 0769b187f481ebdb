package subresources

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/frontproxy"
)

// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstancemigrations,verbs=create

// migrate serves virtualmachines/{name}/migrate as KubeVirt's virt-api,
// which `virtctl migrate` calls: for a caller allowed update on
// virtualmachines/migrate, a VirtualMachineInstanceMigration of the VM's
// running VMI, with the options' addedNodeSelector (none under dry run).
func (a *API) migrate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := a.authorize(ctx, "update", "virtualmachines", "migrate", ns, name); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	opts := &v1.MigrateOptions{}
	if err := decode(body, opts); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	vm := &v1.VirtualMachine{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil || vmi.Status.Phase != v1.Running {
		frontproxy.WriteStatus(w, conflict(name, vmNotRunning))
		return
	}
	m := &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "kubevirt-migrate-vm-", Labels: map[string]string{v1.MigrationSelectorLabel: name}},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: name, AddedNodeSelector: opts.AddedNodeSelector},
	}
	var createOpts []client.CreateOption
	if len(opts.DryRun) > 0 {
		createOpts = append(createOpts, client.DryRunAll)
	}
	if err := a.Client.Create(ctx, m, createOpts...); err != nil {
		frontproxy.WriteStatus(w, fmt.Errorf("creating the migration of VM %s/%s: %w", ns, name, err))
		return
	}
	u, _ := frontproxy.User(ctx)
	a.Log.Info("VM migration", "namespace", ns, "name", name, "migration", m.Name, "user", u.Username, "dryRun", len(opts.DryRun) > 0)
	w.WriteHeader(http.StatusAccepted)
}
