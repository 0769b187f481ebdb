package vmdefaults

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// virtctlVM is `virtctl create vm --name vvm --volume-containerdisk=src:IMG
// --memory=256Mi` as KubeVirt's virtctl prints it.
const virtctlVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"creationTimestamp":null,"name":"vvm","labels":{"a":"b"}},
"spec":{"runStrategy":"Always","template":{"metadata":{"creationTimestamp":null},"spec":{"domain":{"devices":{},"memory":{"guest":"256Mi"},"resources":{}},
"terminationGracePeriodSeconds":180,"volumes":[{"containerDisk":{"image":"r/guest:latest"},"name":"vvm-containerdisk-0"}]}}},"status":{}}`

func request(kind string, op admissionv1.Operation, obj string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: kind}, Operation: op,
		Object: runtime.RawExtension{Raw: []byte(obj)},
	}}
}

// paths lists the patch's operations as "op path".
func paths(resp admission.Response) []string {
	var out []string
	for _, p := range resp.Patches {
		out = append(out, p.Operation+" "+p.Path)
	}
	return out
}

func TestDefaulter(t *testing.T) {
	vmi := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"i"},"spec":{"domain":{"devices":{},"resources":{"requests":{"memory":"128Mi"}}},
"volumes":[{"name":"c","containerDisk":{"image":"r/g:latest"}}]}}`
	instancetyped := strings.Replace(virtctlVM, `"runStrategy"`, `"instancetype":{"name":"u1.nano"},"runStrategy"`, 1)
	for _, tc := range []struct {
		name string
		req  admission.Request
		// want are patch operations that must be there; every one must be
		// under only.
		want []string
		only string
	}{
		{"virtctl's VM", request("VirtualMachine", admissionv1.Create, virtctlVM), []string{
			"add /spec/template/spec/networks", "add /spec/template/spec/domain/devices/disks",
			"add /spec/template/spec/domain/devices/interfaces", "add /spec/template/spec/domain/resources/requests",
			"add /spec/template/spec/domain/firmware", "add /spec/template/spec/domain/machine",
		}, "/spec/template/spec/"},
		{"a VM on update", request("VirtualMachine", admissionv1.Update, virtctlVM), []string{"add /spec/template/spec/networks"}, "/spec/template/spec/"},
		{"a VM with an instancetype: the firmware UUID only", request("VirtualMachine", admissionv1.Create, instancetyped),
			[]string{"add /spec/template/spec/domain/firmware"}, "/spec/template/spec/domain/firmware"},
		{"a VMI on create", request("VirtualMachineInstance", admissionv1.Create, vmi), []string{
			"add /spec/networks", "add /spec/domain/devices/disks", "add /spec/domain/memory", "add /spec/domain/cpu",
		}, "/spec/"},
		{"a VMI on update: nothing", request("VirtualMachineInstance", admissionv1.Update, vmi), nil, ""},
		{"a VM without template: nothing", request("VirtualMachine", admissionv1.Create, `{"metadata":{"name":"x"},"spec":{}}`), nil, ""},
		{"a DataVolume: nothing", request("DataVolume", admissionv1.Create, `{}`), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := Defaulter{}.Handle(context.Background(), tc.req)
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			got := paths(resp)
			if tc.want == nil && len(got) > 0 {
				t.Fatalf("patch %v, want none", got)
			}
			have := map[string]bool{}
			for _, p := range got {
				have[p] = true
				if !strings.HasPrefix(strings.Fields(p)[1], tc.only) {
					t.Errorf("patch %q outside %s", p, tc.only)
				}
			}
			for _, w := range tc.want {
				if !have[w] {
					t.Errorf("patch lacks %q: %v", w, got)
				}
			}
		})
	}
	if resp := (Defaulter{}).Handle(context.Background(), request("VirtualMachine", admissionv1.Create, `{"spec":`)); resp.Allowed || resp.Result.Code != 400 {
		t.Errorf("garbage: %+v, want a 400", resp.Result)
	}
}
