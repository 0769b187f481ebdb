package vmwebhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/tekvirt/tekvirt/controllers/config"
)

func request(t *testing.T, kind string, op admissionv1.Operation, manifest string) admission.Request {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: kind}, Operation: op,
		Object: runtime.RawExtension{Raw: raw},
	}}
}

func TestHandle(t *testing.T) {
	bad := strings.Replace(userGuideVM, "masquerade: {}", "sriov: {}", 1)
	v := Validator{}
	ctx := context.Background()
	if r := v.Handle(ctx, request(t, "VirtualMachine", admissionv1.Create, userGuideVM)); !r.Allowed {
		t.Errorf("good VM denied: %+v", r.Result)
	}
	r := v.Handle(ctx, request(t, "VirtualMachine", admissionv1.Update, bad))
	if r.Allowed || !strings.Contains(r.Result.Message, "interfaces[0].sriov") {
		t.Errorf("bad VM update: %+v", r.Result)
	}
	vmiSpec := "spec:\n  domain:\n    devices:\n      gpus: [{name: g, deviceName: x}]\n"
	if r := v.Handle(ctx, request(t, "VirtualMachineInstance", admissionv1.Create, vmiSpec)); r.Allowed || !strings.Contains(r.Result.Message, "spec.domain.devices.gpus") {
		t.Errorf("bad VMI create: %+v", r.Result)
	}
	hostDev := "spec:\n  domain:\n    memory: {guest: 64Mi}\n    devices:\n      hostDevices: [{name: gpu-1, deviceName: nvidia.com/A100}, {name: gpu-2, deviceName: nvidia.com/A100}]\n"
	if r := v.Handle(ctx, request(t, "VirtualMachineInstance", admissionv1.Create, hostDev)); !r.Allowed {
		t.Errorf("VMI with host devices denied: %+v", r.Result)
	}
	// Updates of a VMI keep its spec: metadata may change (the handler's
	// finalizer, the node label), the spec may not.
	goodVMI := "metadata: {name: a, labels: {x: y}}\nspec:\n  domain: {devices: {}, memory: {guest: 64Mi}}\n"
	update := request(t, "VirtualMachineInstance", admissionv1.Update, goodVMI)
	update.OldObject = request(t, "VirtualMachineInstance", admissionv1.Update, strings.Replace(goodVMI, "{x: y}", "{}", 1)).Object
	if r := v.Handle(ctx, update); !r.Allowed {
		t.Errorf("VMI metadata update (the handler's finalizer) denied: %+v", r.Result)
	}
	update.Object = request(t, "VirtualMachineInstance", admissionv1.Update, strings.Replace(goodVMI, "64Mi", "8Gi", 1)).Object
	if r := v.Handle(ctx, update); r.Allowed || !strings.Contains(r.Result.Message, "spec.domain of VirtualMachineInstance") {
		t.Errorf("VMI spec update: %+v", r.Result)
	}
	// A stop with a grace period through the subresource API: the
	// controller may shorten the grace period, nobody else may.
	update.Object = request(t, "VirtualMachineInstance", admissionv1.Update, goodVMI+"  terminationGracePeriodSeconds: 0\n").Object
	if r := v.Handle(ctx, update); r.Allowed || !strings.Contains(r.Result.Message, "spec.terminationGracePeriodSeconds") {
		t.Errorf("VMI grace period changed by a user: %+v", r.Result)
	}
	update.UserInfo.Username = config.ControllerUser
	if r := v.Handle(ctx, update); !r.Allowed {
		t.Errorf("VMI grace period changed by the controller denied: %+v", r.Result)
	}
	// addvolume and removevolume: the controller adds and removes
	// hotpluggable volumes and their disks, nothing else, nobody else.
	bootVMI := "metadata: {name: a}\nspec:\n  domain: {devices: {disks: [{name: root}]}, memory: {guest: 64Mi}}\n  volumes: [{name: root, dataVolume: {name: root}}]\n"
	hotVMI := "metadata: {name: a}\nspec:\n  domain: {devices: {disks: [{name: root}, {name: hot, disk: {bus: scsi}}]}, memory: {guest: 64Mi}}\n" +
		"  volumes: [{name: root, dataVolume: {name: root}}, {name: hot, dataVolume: {name: hot, hotpluggable: true}}]\n"
	for _, tc := range []struct {
		name, user, old, new, refusal string
	}{
		{"hotplug by the controller", config.ControllerUser, bootVMI, hotVMI, ""},
		{"unplug by the controller", config.ControllerUser, hotVMI, bootVMI, ""},
		{"hotplug by a user", "alice", bootVMI, hotVMI, "spec.domain of VirtualMachineInstance"},
		{"boot volume made hotpluggable", config.ControllerUser, bootVMI, strings.Replace(bootVMI, "{name: root}}", "{name: root, hotpluggable: true}}", 1), "spec.volumes of VirtualMachineInstance"},
		{"boot disk changed with a hotplug", config.ControllerUser, bootVMI, strings.Replace(hotVMI, "[{name: root},", "[{name: root, serial: x},", 1), "spec.domain of VirtualMachineInstance"},
	} {
		u := request(t, "VirtualMachineInstance", admissionv1.Update, tc.new)
		u.OldObject = request(t, "VirtualMachineInstance", admissionv1.Update, tc.old).Object
		u.UserInfo.Username = tc.user
		r := v.Handle(ctx, u)
		if tc.refusal == "" && !r.Allowed || tc.refusal != "" && (r.Allowed || !strings.Contains(r.Result.Message, tc.refusal)) {
			t.Errorf("%s: allowed %v %+v", tc.name, r.Allowed, r.Result)
		}
	}
}

func TestCloneNeedsSourcePermission(t *testing.T) {
	s := runtime.NewScheme()
	if err := authzv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var asked authzv1.ResourceAttributes
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			sar := obj.(*authzv1.SubjectAccessReview)
			asked = *sar.Spec.ResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "alice"
			return nil
		},
	}).Build()
	v := Validator{Client: c}
	dv := "spec:\n  source:\n    pvc: {name: golden, namespace: ns}\n  storage: {resources: {requests: {storage: 1Gi}}}\nmetadata: {namespace: ns, name: copy}\n"
	req := request(t, "DataVolume", admissionv1.Create, dv)
	req.Kind.Group = "cdi.kubevirt.io"
	req.UserInfo.Username = "alice"
	if r := v.Handle(context.Background(), req); !r.Allowed {
		t.Errorf("alice denied: %+v", r.Result)
	}
	if asked.Resource != "datavolumes" || asked.Subresource != "source" || asked.Verb != "create" || asked.Namespace != "ns" {
		t.Errorf("asked %+v", asked)
	}
	req.UserInfo.Username = "bob"
	if r := v.Handle(context.Background(), req); r.Allowed || !strings.Contains(r.Result.Message, "bob may not clone PVC ns/golden") {
		t.Errorf("bob: %+v", r.Result)
	}
	s3 := "spec:\n  source:\n    s3: {url: 's3://b/k'}\n"
	if r := v.Handle(context.Background(), request(t, "DataVolume", admissionv1.Create, s3)); r.Allowed || !strings.Contains(r.Result.Message, "spec.source.s3 is not supported") {
		t.Errorf("s3: %+v", r.Result)
	}
}

func TestDataVolumeTemplatesAreChecked(t *testing.T) {
	vm := strings.Replace(userGuideVM, "  runStrategy: Halted", "  runStrategy: Halted\n  dataVolumeTemplates:\n    - metadata: {name: root}\n      spec:\n        source: {s3: {url: 's3://b/k'}}\n        storage: {resources: {requests: {storage: 1Gi}}}", 1)
	r := Validator{}.Handle(context.Background(), request(t, "VirtualMachine", admissionv1.Create, vm))
	if r.Allowed || !strings.Contains(r.Result.Message, "spec.dataVolumeTemplates[0] (root): spec.source.s3 is not supported") {
		t.Errorf("s3 template: %+v", r.Result)
	}
	ok := strings.Replace(vm, "s3: {url: 's3://b/k'}", "http: {url: 'http://x/disk.img'}", 1)
	if r := (Validator{}).Handle(context.Background(), request(t, "VirtualMachine", admissionv1.Create, ok)); !r.Allowed {
		t.Errorf("http template denied: %+v", r.Result)
	}
}

func TestHandleRejectsNamesThatAreNotDNSLabels(t *testing.T) {
	v := Validator{}
	ctx := context.Background()
	traversal := strings.Replace(userGuideVM, "- name: cloudinitdisk\n          cloudInitNoCloud", "- name: x/../../../../tmp/owned\n          cloudInitNoCloud", 1)
	for _, tc := range []struct {
		name, kind, manifest, want string
	}{
		{"VM volume path traversal", "VirtualMachine", traversal,
			`spec.template.spec.volumes[1].name "x/../../../../tmp/owned" is not a valid name`},
		{"VM disk name with a slash", "VirtualMachine", strings.Replace(userGuideVM, "- name: containerdisk\n              disk", "- name: a/b\n              disk", 1),
			`spec.template.spec.domain.devices.disks[0].name "a/b" is not a valid name`},
		{"VM volume used twice", "VirtualMachine", strings.Replace(userGuideVM, "- name: cloudinitdisk\n          cloudInitNoCloud", "- name: containerdisk\n          cloudInitNoCloud", 1),
			`spec.template.spec.volumes[1].name "containerdisk" is used twice`},
		{"VMI volume path traversal", "VirtualMachineInstance",
			"spec:\n  domain: {devices: {disks: [{name: ../x, disk: {bus: virtio}}]}}\n  volumes: [{name: ../x, containerDisk: {image: r/i}}]\n",
			`spec.volumes[0].name "../x" is not a valid name`},
		{"VMI network name upper case", "VirtualMachineInstance",
			"spec:\n  domain: {devices: {interfaces: [{name: Default, masquerade: {}}]}}\n  networks: [{name: Default, pod: {}}]\n",
			`spec.networks[0].name "Default" is not a valid name`},
		// A device named after a native resource would replace the launcher
		// Pod's own request (1 byte of memory instead of the guest's).
		{"VMI host device named memory", "VirtualMachineInstance",
			"spec:\n  domain: {devices: {hostDevices: [{name: gpu, deviceName: memory}]}}\n",
			`spec.domain.devices.hostDevices[0].deviceName: device "memory" is not an extended resource`},
		{"VMI host device in kubernetes.io", "VirtualMachineInstance",
			"spec:\n  domain: {devices: {hostDevices: [{name: gpu, deviceName: hugepages.kubernetes.io/x}]}}\n",
			`device "hugepages.kubernetes.io/x" is not an extended resource`},
		{"VMI host device named twice", "VirtualMachineInstance",
			"spec:\n  domain: {devices: {hostDevices: [{name: gpu, deviceName: nvidia.com/A100}, {name: gpu, deviceName: nvidia.com/A100}]}}\n",
			`spec.domain.devices.hostDevices[1].name "gpu" is used twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := v.Handle(ctx, request(t, tc.kind, admissionv1.Create, tc.manifest))
			if r.Allowed || !strings.Contains(r.Result.Message, tc.want) {
				t.Fatalf("got allowed=%v %q, want denied with %q", r.Allowed, r.Result.Message, tc.want)
			}
		})
	}
}

// sarClient answers SubjectAccessReviews: only alice may clone, anywhere.
func sarClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := authzv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			sar := obj.(*authzv1.SubjectAccessReview)
			sar.Status.Allowed = sar.Spec.User == "alice"
			return nil
		},
	}).Build()
}

func TestCloneRulesOnUpdate(t *testing.T) {
	v := Validator{Client: sarClient(t)}
	ctx := context.Background()
	as := func(req admission.Request, user string) admission.Request {
		req.UserInfo.Username = user
		req.Namespace, req.Name = "mine", "x"
		return req
	}
	// A DataVolume's spec never changes: an upload switched to a PVC of
	// another namespace is refused whoever asks.
	upload := "metadata: {namespace: mine, name: x}\nspec:\n  source: {upload: {}}\n  storage: {resources: {requests: {storage: 1Gi}}}\n"
	stolen := strings.Replace(upload, "upload: {}", "pvc: {namespace: victim, name: disk}", 1)
	req := as(request(t, "DataVolume", admissionv1.Update, stolen), "alice")
	req.OldObject = request(t, "DataVolume", admissionv1.Update, upload).Object
	if r := v.Handle(ctx, req); r.Allowed || !strings.Contains(r.Result.Message, "spec.source of DataVolume mine/x cannot change after creation") {
		t.Errorf("DataVolume source switched on update: %+v", r.Result)
	}
	req.Object = req.OldObject
	if r := v.Handle(ctx, req); !r.Allowed {
		t.Errorf("DataVolume update without a spec change denied: %+v", r.Result)
	}

	// A VM update that adds a clone template is checked like a create, as
	// the user the requester webhook recorded for it; other updates are not.
	template := "\n  dataVolumeTemplates:\n    - metadata: {name: root}\n      spec:\n        source: {pvc: {namespace: victim, name: disk}}\n        storage: {resources: {requests: {storage: 1Gi}}}"
	withClone := strings.Replace(userGuideVM, "  runStrategy: Halted", "  runStrategy: Halted"+template, 1)
	req = as(request(t, "VirtualMachine", admissionv1.Update, "metadata: {annotations: {tekvirt.io/requester: '{\"username\":\"bob\"}'}}"+withClone), "bob")
	req.OldObject = request(t, "VirtualMachine", admissionv1.Update, userGuideVM).Object
	if r := v.Handle(ctx, req); r.Allowed || !strings.Contains(r.Result.Message, "spec.dataVolumeTemplates[0] (root): bob may not clone PVC victim/disk") {
		t.Errorf("VM update adding a clone template: %+v", r.Result)
	}
	req.OldObject = req.Object // same templates: a runStrategy change, say
	if r := v.Handle(ctx, req); !r.Allowed {
		t.Errorf("VM update with unchanged templates denied: %+v", r.Result)
	}
	req = as(request(t, "VirtualMachine", admissionv1.Create, "metadata: {annotations: {tekvirt.io/requester: '{\"username\":\"alice\"}'}}"+withClone), "system:serviceaccount:x:y")
	if r := v.Handle(ctx, req); !r.Allowed {
		t.Errorf("VM recorded as alice's denied: %+v", r.Result)
	}

	// A DataSource pointed at another namespace's PVC needs the clone
	// right there, on create and on update.
	ds := "metadata: {namespace: mine, name: golden}\nspec:\n  source: {pvc: {namespace: victim, name: disk}}\n"
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
		if r := v.Handle(ctx, as(request(t, "DataSource", op, ds), "bob")); r.Allowed || !strings.Contains(r.Result.Message, "bob may not point DataSource mine/golden at PVC victim/disk") {
			t.Errorf("%s of a DataSource on another namespace's PVC: %+v", op, r.Result)
		}
		if r := v.Handle(ctx, as(request(t, "DataSource", op, ds), "alice")); !r.Allowed {
			t.Errorf("%s by alice denied: %+v", op, r.Result)
		}
	}
	own := strings.Replace(ds, "namespace: victim, ", "", 1)
	if r := v.Handle(ctx, as(request(t, "DataSource", admissionv1.Create, own), "bob")); !r.Allowed {
		t.Errorf("a DataSource on its own namespace's PVC denied: %+v", r.Result)
	}
}
