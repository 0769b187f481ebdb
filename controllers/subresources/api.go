package subresources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"

	"github.com/go-logr/logr"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/frontproxy"
)

// Group and Version of the API served.
const (
	Group   = "subresources.kubevirt.io"
	Version = "v1"
)

var groupVersion = Group + "/" + Version

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines,verbs=get;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachines/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=virtualmachineinstances,verbs=get;patch
// +kubebuilder:rbac:groups=subresources.kubevirt.io,resources=virtualmachineinstances/console;virtualmachineinstances/vnc;virtualmachineinstances/portforward,verbs=get

// API serves the group.
type API struct {
	// Client reads and patches VMs and VMIs (read past any cache: a state
	// change must see the latest requests) and reviews access.
	Client client.Client
	// AllowedNames are the front proxy's client certificate names
	// (requestheader-allowed-names); empty allows any it signed.
	AllowedNames []string
	// Version is what GET version answers (virtctl version prints it).
	Version version.Info
	// Handlers reaches the node handlers for the VMI operations; nil
	// serves none.
	Handlers *Handlers
	Log      logr.Logger
}

// Handler routes the API's paths.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }
	mux.HandleFunc("GET /healthz", ok)
	auth := func(h http.HandlerFunc) http.HandlerFunc { return frontproxy.Authenticated(a.AllowedNames, h) }
	mux.HandleFunc("GET /apis", auth(func(w http.ResponseWriter, _ *http.Request) {
		frontproxy.WriteJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{apiGroup()}})
	}))
	mux.HandleFunc("GET /apis/"+Group, auth(func(w http.ResponseWriter, _ *http.Request) {
		g := apiGroup()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		frontproxy.WriteJSON(w, http.StatusOK, &g)
	}))
	mux.HandleFunc("GET /apis/"+groupVersion, auth(func(w http.ResponseWriter, _ *http.Request) {
		frontproxy.WriteJSON(w, http.StatusOK, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: groupVersion, APIResources: a.resources()})
	}))
	mux.HandleFunc("GET /apis/"+groupVersion+"/healthz", auth(ok))
	mux.HandleFunc("GET /apis/"+groupVersion+"/version", auth(func(w http.ResponseWriter, _ *http.Request) {
		v := a.Version
		if v.GoVersion == "" {
			v.GoVersion, v.Compiler, v.Platform = runtime.Version(), runtime.Compiler, runtime.GOOS+"/"+runtime.GOARCH
		}
		frontproxy.WriteJSON(w, http.StatusOK, &v)
	}))
	vm := "PUT /apis/" + groupVersion + "/namespaces/{namespace}/virtualmachines/{name}/"
	mux.HandleFunc(vm+"start", auth(a.vmChange("start", planWith(planStart, func(o *v1.StartOptions) []string { return o.DryRun }))))
	mux.HandleFunc(vm+"stop", auth(a.vmChange("stop", planWith(planStop, func(o *v1.StopOptions) []string { return o.DryRun }))))
	mux.HandleFunc(vm+"restart", auth(a.vmChange("restart", planWith(planRestart, func(o *v1.RestartOptions) []string { return o.DryRun }))))
	mux.HandleFunc(vm+"migrate", auth(a.migrate))
	vmiPut := "PUT /apis/" + groupVersion + "/namespaces/{namespace}/virtualmachineinstances/{name}/"
	for _, sub := range volumeSubresources {
		mux.HandleFunc(vm+sub, auth(a.volumeChange("virtualmachines", sub)))
		mux.HandleFunc(vmiPut+sub, auth(a.volumeChange("virtualmachineinstances", sub)))
	}
	mux.HandleFunc("PUT /apis/"+groupVersion+"/namespaces/{namespace}/expand-vm-spec", auth(a.expandVMSpec))
	mux.HandleFunc("GET /apis/"+groupVersion+"/namespaces/{namespace}/virtualmachines/{name}/expand-spec", auth(a.expandSpec))
	if a.Handlers != nil {
		vmi := "/apis/" + groupVersion + "/namespaces/{namespace}/virtualmachineinstances/{name}/"
		for _, op := range vmiReads {
			mux.HandleFunc("GET "+vmi+op, auth(a.vmiOp(op, "get")))
		}
		for _, op := range vmiChanges {
			mux.HandleFunc("PUT "+vmi+op, auth(a.vmiOp(op, "update")))
		}
		mux.HandleFunc("GET "+vmi+"console", auth(a.serveStream("virtualmachineinstances", consoleStream)))
		mux.HandleFunc("GET "+vmi+"vnc", auth(a.serveStream("virtualmachineinstances", vncStream)))
		vm := "GET /apis/" + groupVersion + "/namespaces/{namespace}/virtualmachines/{name}/"
		for _, pf := range []string{"portforward/{port}", "portforward/{port}/{protocol}"} {
			mux.HandleFunc("GET "+vmi+pf, auth(a.serveStream("virtualmachineinstances", portForwardStream)))
			mux.HandleFunc(vm+pf, auth(a.serveStream("virtualmachines", portForwardStream)))
		}
	}
	return mux
}

func apiGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: Version}
	return metav1.APIGroup{Name: Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

// resources are the subresources served, as KubeVirt lists them.
func (a *API) resources() []metav1.APIResource {
	out := []metav1.APIResource{
		{Name: "expand-vm-spec", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
		{Name: "virtualmachines/expand-spec", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"get"}},
	}
	for _, s := range []string{"start", "stop", "restart", "migrate"} {
		out = append(out, metav1.APIResource{Name: "virtualmachines/" + s, Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}})
	}
	for _, s := range volumeSubresources {
		out = append(out,
			metav1.APIResource{Name: "virtualmachines/" + s, Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
			metav1.APIResource{Name: "virtualmachineinstances/" + s, Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}})
	}
	if a.Handlers == nil {
		return out
	}
	for _, s := range vmiReads {
		out = append(out, metav1.APIResource{Name: "virtualmachineinstances/" + s, Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}})
	}
	for _, s := range vmiChanges {
		out = append(out, metav1.APIResource{Name: "virtualmachineinstances/" + s, Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"update"}})
	}
	for _, s := range []string{"console", "vnc", "portforward"} {
		out = append(out, metav1.APIResource{Name: "virtualmachineinstances/" + s, Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}})
	}
	return append(out, metav1.APIResource{Name: "virtualmachines/portforward", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"get"}})
}

// decode reads a request body (none is an empty one) into opts.
func decode(body []byte, opts any) error {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, opts); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %v", err))
	}
	return nil
}

// planFunc decides a state change from the VM, its VMI (nil: none) and the
// request's body, and returns the body's dryRun.
type planFunc func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, body []byte) (change, []string, error)

// planWith is plan, for a body that decodes into options O.
func planWith[O any](plan func(*v1.VirtualMachine, *v1.VirtualMachineInstance, *O) (change, error), dryRun func(*O) []string) planFunc {
	return func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance, body []byte) (change, []string, error) {
		opts := new(O)
		if err := decode(body, opts); err != nil {
			return change{}, nil, err
		}
		c, err := plan(vm, vmi, opts)
		return c, dryRun(opts), err
	}
}

// maxBody bounds a state change's options.
const maxBody = 64 << 10

// readBody reads a request's body, at most maxBody bytes; an error is a
// 400.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, apierrors.NewBadRequest("reading the request: " + err.Error())
	}
	return body, nil
}

// vmChange serves a state change of a VM: the caller must be allowed
// update on virtualmachines/<sub>; plan decides the change from the VM, its
// VMI and the request's options; the change is applied unless dry run.
func (a *API) vmChange(sub string, plan planFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if err := a.authorize(ctx, "update", "virtualmachines", sub, ns, name); err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		body, err := readBody(r)
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		dryRun, err := a.change(ctx, ns, name, plan, body)
		if err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		u, _ := frontproxy.User(ctx)
		a.Log.Info("VM state change", "change", sub, "namespace", ns, "name", name, "user", u.Username, "dryRun", len(dryRun) > 0)
		w.WriteHeader(http.StatusAccepted)
	}
}

// raceAttempts bounds how often change reads, plans and writes again after
// a write lost a race: the VM controller writes a new VM's status (and a
// VMI's) right as clients start it, which is no reason to refuse the start.
const raceAttempts = 5

// change reads the VM and its VMI, plans the change and applies it; a write
// that lost a race to another writer is planned again from what that
// writer left, so a concurrent start still answers "already running".
func (a *API) change(ctx context.Context, ns, name string, plan planFunc, body []byte) ([]string, error) {
	for attempt := 1; ; attempt++ {
		vm := &v1.VirtualMachine{}
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
			return nil, err
		}
		vmi := &v1.VirtualMachineInstance{}
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); apierrors.IsNotFound(err) {
			vmi = nil
		} else if err != nil {
			return nil, err
		}
		c, dryRun, err := plan(vm, vmi, body)
		if err != nil {
			return nil, err
		}
		err = a.apply(ctx, vm, vmi, c, dryRun)
		var lost lostRace
		if !errors.As(err, &lost) {
			return dryRun, err
		}
		if attempt == raceAttempts {
			return nil, apierrors.NewConflict(vmResource, name, lost.err)
		}
		a.Log.V(1).Info("VM state change lost a race, planning again", "namespace", ns, "name", name, "attempt", attempt)
	}
}

// authorize asks the API server whether the caller may verb the
// subresource, answering Forbidden as the API server does when not.
func (a *API) authorize(ctx context.Context, verb, resource, sub, ns, name string) error {
	u, ok := frontproxy.User(ctx)
	if !ok || u.Username == "" {
		return apierrors.NewUnauthorized("the request names no user")
	}
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: Group, Version: Version, Resource: resource, Subresource: sub, Name: name},
	}}
	if err := a.Client.Create(ctx, sar); err != nil {
		return fmt.Errorf("reviewing access of %s: %w", u.Username, err)
	}
	if !sar.Status.Allowed {
		if sub != "" {
			resource += "/" + sub
		}
		why := fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", u.Username, verb, resource, Group, ns)
		if sar.Status.Reason != "" {
			why += ": " + sar.Status.Reason
		}
		return apierrors.NewForbidden(schema.GroupResource{Group: Group, Resource: resource}, name, fmt.Errorf("%s", why))
	}
	return nil
}
