package requester

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const controller = "system:serviceaccount:tekvirt-system:tekvirt-controller"

var (
	alice = authnv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}}
	admin = authnv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}}
	ctrlr = authnv1.UserInfo{Username: controller}
)

func raw(annotation string, templates string) []byte {
	obj := map[string]any{"metadata": map[string]any{"name": "x"}, "spec": map[string]any{}}
	if annotation != "" {
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{Annotation: annotation, "other": "kept"}
	}
	if templates != "" {
		obj["spec"].(map[string]any)["dataVolumeTemplates"] = []any{map[string]any{"metadata": map[string]any{"name": templates}}}
	}
	data, _ := json.Marshal(obj)
	return data
}

// apply runs the Recorder and returns the annotation the object ends with.
func apply(t *testing.T, kind string, op admissionv1.Operation, user authnv1.UserInfo, obj, old []byte) (string, bool) {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Kind: kind}, Operation: op, UserInfo: user,
		Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}}}
	resp := Recorder{Controller: controller}.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	doc := map[string]any{}
	if err := json.Unmarshal(obj, &doc); err != nil {
		t.Fatal(err)
	}
	before, _ := doc["metadata"].(map[string]any)["annotations"].(map[string]any)
	_, hadOther := before["other"]
	// Apply the JSON patch's operations on metadata.annotations by hand: the
	// Recorder only ever adds, replaces or removes the one annotation.
	for _, p := range resp.Patches {
		switch p.Path {
		case "/metadata/annotations":
			doc["metadata"].(map[string]any)["annotations"] = p.Value
		case "/metadata/annotations/tekvirt.io~1requester":
			ann := doc["metadata"].(map[string]any)["annotations"].(map[string]any)
			if p.Operation == "remove" {
				delete(ann, Annotation)
			} else {
				ann[Annotation] = p.Value
			}
		default:
			t.Fatalf("unexpected patch %+v", p)
		}
	}
	ann, _ := doc["metadata"].(map[string]any)["annotations"].(map[string]any)
	v, ok := ann[Annotation].(string)
	if hadOther && ann["other"] != "kept" {
		t.Fatalf("another annotation was lost: %v", ann)
	}
	return v, ok
}

func TestRecorder(t *testing.T) {
	forged := Encode(admin)
	for _, tc := range []struct {
		name     string
		kind     string
		op       admissionv1.Operation
		user     authnv1.UserInfo
		obj, old []byte
		want     authnv1.UserInfo
		none     bool
	}{
		{name: "create records the creator", kind: "DataVolume", op: admissionv1.Create, user: alice, obj: raw("", ""), want: alice},
		{name: "a forged record on create is replaced", kind: "DataVolume", op: admissionv1.Create, user: alice, obj: raw(forged, ""), want: alice},
		{name: "the controller hands a VM's requester on", kind: "DataVolume", op: admissionv1.Create, user: ctrlr, obj: raw(Encode(alice), ""), want: alice},
		{name: "the controller's own object records the controller", kind: "DataVolume", op: admissionv1.Create, user: ctrlr, obj: raw("", ""), want: ctrlr},
		{name: "a DataVolume keeps its creator on update", kind: "DataVolume", op: admissionv1.Update, user: admin, obj: raw("", ""), old: raw(Encode(alice), ""), want: alice},
		{name: "a forged record on update is replaced by the stored one", kind: "DataVolume", op: admissionv1.Update, user: alice, obj: raw(forged, ""), old: raw(Encode(alice), ""), want: alice},
		{name: "an object stored without a record gets none on update", kind: "DataVolume", op: admissionv1.Update, user: alice, obj: raw(forged, ""), old: raw("", ""), none: true},
		{name: "a VM whose templates change records the updater", kind: "VirtualMachine", op: admissionv1.Update, user: alice, obj: raw(Encode(admin), "new"), old: raw(Encode(admin), "old"), want: alice},
		{name: "other VM updates keep the record", kind: "VirtualMachine", op: admissionv1.Update, user: alice, obj: raw(forged, "same"), old: raw(Encode(alice), "same"), want: alice},
		{name: "the controller's VM updates keep the record", kind: "VirtualMachine", op: admissionv1.Update, user: ctrlr, obj: raw("", "new"), old: raw(Encode(alice), "old"), want: alice},
		{name: "a restore records its creator", kind: "VirtualMachineRestore", op: admissionv1.Create, user: alice, obj: raw(forged, ""), want: alice},
		{name: "a restore whose spec changes records the updater", kind: "VirtualMachineRestore", op: admissionv1.Update, user: admin, obj: raw(Encode(alice), "new"), old: raw(Encode(alice), "old"), want: admin},
		{name: "the controller's restore updates keep the record", kind: "VirtualMachineRestore", op: admissionv1.Update, user: ctrlr, obj: raw(Encode(admin), "new"), old: raw(Encode(alice), "old"), want: alice},
		{name: "a restore's metadata update keeps the record", kind: "VirtualMachineRestore", op: admissionv1.Update, user: admin, obj: raw(Encode(admin), "same"), old: raw(Encode(alice), "same"), want: alice},
		// The same webhook call writes a VMI's defaults: no record on it.
		{name: "a VMI gets no record", kind: "VirtualMachineInstance", op: admissionv1.Create, user: alice, obj: raw("", ""), none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := apply(t, tc.kind, tc.op, tc.user, tc.obj, tc.old)
			if tc.none {
				if ok {
					t.Fatalf("record %q, want none", got)
				}
				return
			}
			var u authnv1.UserInfo
			if err := json.Unmarshal([]byte(got), &u); !ok || err != nil || u.Username != tc.want.Username {
				t.Fatalf("record %q (%v), want %s", got, ok, tc.want.Username)
			}
		})
	}
}
