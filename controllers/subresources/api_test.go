package subresources

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// serve sends a request as the kube-apiserver's front proxy would, for
// user (none: no front proxy certificate at all).
func serve(t *testing.T, a *API, method, path, user, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if user != "" {
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "front-proxy-client"}}}}}
		r.Header.Set("X-Remote-User", user)
		r.Header.Add("X-Remote-Group", "system:authenticated")
	}
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, r)
	return w
}

// testAPI serves VMs "halted" (Halted), "manual" (Manual, its VMI running)
// and "always" (Always) in namespace ns to alice, who may do anything, and
// to bob, who may do nothing.
func testAPI(t *testing.T) (*API, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, instancetypev1beta1.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	vm := func(name string, rs v1.VirtualMachineRunStrategy) *v1.VirtualMachine {
		return &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.VirtualMachineSpec{RunStrategy: &rs}}
	}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "manual", UID: "vmi-1"}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}}
	c := fake.NewClientBuilder().WithScheme(s).
		WithObjects(vm("halted", v1.RunStrategyHalted), vm("manual", v1.RunStrategyManual), vm("always", v1.RunStrategyAlways), vmi).
		WithObjects(claimsOfVolumeTests()...).
		WithObjects(
			&instancetypev1beta1.VirtualMachineClusterInstancetype{ObjectMeta: metav1.ObjectMeta{Name: "u1.small"},
				Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{CPU: instancetypev1beta1.CPUInstancetype{Guest: 1},
					Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("2Gi")}}}).
		WithStatusSubresource(&v1.VirtualMachine{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authzv1.SubjectAccessReview); ok {
				ra := sar.Spec.ResourceAttributes
				sar.Status.Allowed = sar.Spec.User == "alice" && ra.Group == Group
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	return &API{Client: c, Log: logr.Discard()}, c
}

// claimsOfVolumeTests are the claims TestVolumeChanges hotplugs: the
// DataVolume data, the single-node claim held and the shared claim common,
// both of which the pending VMI holder uses.
func claimsOfVolumeTests() []client.Object {
	claim := func(name string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{mode}}}
	}
	use := func(name string) v1.Volume {
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
	}
	return []client.Object{
		&cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}, Spec: cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{}}},
		claim("held", corev1.ReadWriteOnce), claim("common", corev1.ReadWriteMany),
		&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "holder"},
			Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{use("held"), use("common")}}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Pending}},
	}
}

func TestDiscoveryAndVersion(t *testing.T) {
	a, _ := testAPI(t)
	if w := serve(t, a, "GET", "/apis/"+groupVersion, "", ""); w.Code != http.StatusUnauthorized {
		t.Errorf("discovery without the front proxy: %d", w.Code)
	}
	w := serve(t, a, "GET", "/apis/"+groupVersion, "alice", "")
	var list metav1.APIResourceList
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != http.StatusOK {
		t.Fatalf("discovery: %d %s", w.Code, w.Body)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, " "); got != "expand-vm-spec virtualmachines/expand-spec virtualmachines/start virtualmachines/stop virtualmachines/restart virtualmachines/migrate "+
		"virtualmachines/addvolume virtualmachineinstances/addvolume virtualmachines/removevolume virtualmachineinstances/removevolume" {
		t.Errorf("resources %q", got)
	}
	w = serve(t, a, "GET", "/apis/"+groupVersion+"/version", "alice", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"goVersion":"go`) {
		t.Errorf("version: %d %s", w.Code, w.Body)
	}
}

func TestStateChanges(t *testing.T) {
	a, c := testAPI(t)
	path := func(vm, sub string) string {
		return "/apis/" + groupVersion + "/namespaces/ns/virtualmachines/" + vm + "/" + sub
	}
	w := serve(t, a, "PUT", path("halted", "start"), "bob", "{}")
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `cannot update resource \"virtualmachines/start\" in API group \"subresources.kubevirt.io\"`) {
		t.Errorf("start by bob: %d %s", w.Code, w.Body)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "halted"}, vm); err != nil || *vm.Spec.RunStrategy != v1.RunStrategyHalted {
		t.Fatalf("bob's refused start changed the VM: %v %v", vm.Spec.RunStrategy, err)
	}

	if w := serve(t, a, "PUT", path("halted", "start"), "alice", ""); w.Code != http.StatusAccepted {
		t.Errorf("start by alice: %d %s", w.Code, w.Body)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "halted"}, vm); err != nil || *vm.Spec.RunStrategy != v1.RunStrategyAlways {
		t.Errorf("started VM: runStrategy %v %v", *vm.Spec.RunStrategy, err)
	}

	if w := serve(t, a, "PUT", path("manual", "stop"), "alice", "{}"); w.Code != http.StatusAccepted {
		t.Errorf("stop: %d %s", w.Code, w.Body)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "manual"}, vm); err != nil || actions(vm.Status.StateChangeRequests) != "Stop(vmi-1)" {
		t.Errorf("stopped Manual VM: requests %q %v", actions(vm.Status.StateChangeRequests), err)
	}

	w = serve(t, a, "PUT", path("always", "start"), "alice", "")
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "Always does not support manual start requests") {
		t.Errorf("start of an Always VM: %d %s", w.Code, w.Body)
	}
	if w := serve(t, a, "PUT", path("always", "stop"), "alice", `{"dryRun":["All"]}`); w.Code != http.StatusAccepted {
		t.Errorf("dry-run stop: %d %s", w.Code, w.Body)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "always"}, vm); err != nil || *vm.Spec.RunStrategy != v1.RunStrategyAlways {
		t.Errorf("a dry-run stop changed the VM: %v %v", *vm.Spec.RunStrategy, err)
	}
	if w := serve(t, a, "PUT", path("always", "stop"), "alice", "{bad"); w.Code != http.StatusBadRequest {
		t.Errorf("malformed body: %d %s", w.Code, w.Body)
	}
	if w := serve(t, a, "PUT", path("nothere", "start"), "alice", ""); w.Code != http.StatusNotFound {
		t.Errorf("start of a missing VM: %d %s", w.Code, w.Body)
	}
}

// TestStreamRefusals: a stream is refused before any node handler is
// asked: a VM that has no VMI is KubeVirt's 409, a request that is no
// websocket a 400 saying how to ask, a caller without the right a 403.
func TestStreamRefusals(t *testing.T) {
	a, _ := testAPI(t)
	a.Handlers = &Handlers{TokenFile: "/nonexistent"}
	base := "/apis/subresources.kubevirt.io/v1/namespaces/ns/"
	for _, tc := range []struct {
		path, user string
		code       int
		want       string
	}{
		{base + "virtualmachines/halted/portforward/22", "alice", http.StatusConflict, "VMI is not started"},
		{base + "virtualmachineinstances/manual/portforward/22", "alice", http.StatusBadRequest, "websocket"},
		{base + "virtualmachineinstances/manual/console", "alice", http.StatusBadRequest, "plain.kubevirt.io"},
		{base + "virtualmachineinstances/manual/vnc", "bob", http.StatusForbidden, "virtualmachineinstances/vnc"},
		{base + "virtualmachineinstances/gone/console", "alice", http.StatusNotFound, "gone"},
	} {
		if w := serve(t, a, http.MethodGet, tc.path, tc.user, ""); w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("GET %s as %s: %d %s, want %d naming %q", tc.path, tc.user, w.Code, w.Body, tc.code, tc.want)
		}
	}
}

// TestStateChangeRaces: a start whose write finds the VM changed since it
// was read (the VM controller writes a new VM's status as clients start it)
// is planned again from the VM as it is now: an unrelated change lets the
// start through, another writer's start answers its Conflict, and a VM that
// changes under every attempt is a Conflict in the end, not a loop.
func TestStateChangeRaces(t *testing.T) {
	start := "/apis/" + groupVersion + "/namespaces/ns/virtualmachines/halted/start"
	for _, tc := range []struct {
		name string
		// meddle changes the VM between the handler's read and its write,
		// on the write numbered n.
		meddle func(vm *v1.VirtualMachine, n int) bool
		code   int
		want   string
		writes int
	}{
		{"status written once", func(vm *v1.VirtualMachine, n int) bool {
			vm.Status.Created = true
			return n == 1
		}, http.StatusAccepted, "", 2},
		{"started by another", func(vm *v1.VirtualMachine, n int) bool {
			always := v1.RunStrategyAlways
			vm.Spec.RunStrategy = &always
			return n == 1
		}, http.StatusConflict, "Always does not support manual start requests", 1},
		{"changed every time", func(vm *v1.VirtualMachine, n int) bool {
			vm.Status.PrintableStatus = v1.VirtualMachinePrintableStatus(fmt.Sprint("s", n))
			return true
		}, http.StatusConflict, "modified", raceAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, c := testAPI(t)
			writes := 0
			a.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					writes++
					vm := &v1.VirtualMachine{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), vm); err != nil {
						return err
					}
					if tc.meddle(vm, writes) {
						if err := c.Update(ctx, vm); err != nil {
							return err
						}
					}
					return c.Patch(ctx, obj, patch, opts...)
				}})
			w := serve(t, a, "PUT", start, "alice", "")
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("start: %d %s, want %d naming %q", w.Code, w.Body, tc.code, tc.want)
			}
			if writes != tc.writes {
				t.Errorf("%d writes, want %d", writes, tc.writes)
			}
			vm := &v1.VirtualMachine{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "halted"}, vm); err != nil {
				t.Fatal(err)
			}
			if started := *vm.Spec.RunStrategy == v1.RunStrategyAlways; started != (tc.name != "changed every time") {
				t.Errorf("runStrategy %s after the start", *vm.Spec.RunStrategy)
			}
		})
	}
}

// A stop with a grace period while a restart deletes the VMI: the VMI is
// gone by the time its grace period is written, and the VM still stops
// (not "virtualmachineinstances ... not found").
func TestStopWhileTheVMIGoes(t *testing.T) {
	a, c := testAPI(t)
	ctx := context.Background()
	a.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*v1.VirtualMachineInstance); ok {
				if err := c.Delete(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		}})
	w := serve(t, a, "PUT", "/apis/"+groupVersion+"/namespaces/ns/virtualmachines/manual/stop", "alice", `{"gracePeriod": 0}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("stop: %d %s, want 202", w.Code, w.Body)
	}
	vm := &v1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "manual"}, vm); err != nil {
		t.Fatal(err)
	}
	if r := vm.Status.StateChangeRequests; len(r) != 1 || r[0].Action != v1.StopRequest {
		t.Errorf("state change requests %+v after the stop, want one stop", r)
	}
}
