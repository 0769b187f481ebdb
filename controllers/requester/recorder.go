package requester

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Recorder is the mutating webhook that writes Annotation on DataVolumes,
// VirtualMachines and VirtualMachineRestores (whose new VM and disks the
// controller makes as the restore's requester).
type Recorder struct {
	// Controller is the user name the controller runs as: the only one
	// whose record on a new object is kept, as it hands a VM's requester
	// on to the DataVolumes of the VM's templates.
	Controller string
}

// object is the part of a DataVolume or VirtualMachine the Recorder reads.
type object struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	// Spec is the whole spec: a VM's dataVolumeTemplates, or all of a
	// restore's.
	Spec map[string]any `json:"spec"`
}

// recorded are the kinds the Recorder writes Annotation on.
var recorded = map[string]bool{"VirtualMachine": true, "DataVolume": true, "VirtualMachineRestore": true}

// Handle implements admission.Handler.
func (r Recorder) Handle(_ context.Context, req admission.Request) admission.Response {
	if !recorded[req.Kind.Kind] ||
		req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var obj, old object
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	}
	if req.Operation == admissionv1.Update {
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored %s: %w", req.Kind.Kind, err))
		}
	}
	want, keep := r.record(req, &obj, &old)
	got, has := obj.Metadata.Annotations[Annotation]
	if has == keep && got == want {
		return admission.Allowed("")
	}
	var full map[string]any
	if err := json.Unmarshal(req.Object.Raw, &full); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	meta, _ := full["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		full["metadata"] = meta
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	if keep {
		annotations[Annotation] = want
	} else {
		delete(annotations, Annotation)
	}
	meta["annotations"] = annotations
	raw, err := json.Marshal(full)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// record decides the annotation's value (keep false: none at all).
//   - A new object records who creates it; only the controller's own
//     record (a VM's requester on its template's DataVolume) is kept.
//   - A DataVolume keeps its creator: its spec never changes.
//   - A VirtualMachine records who last changed its dataVolumeTemplates
//     (the validating webhook checks that user's right to clone every one
//     of them), a VirtualMachineRestore who last changed its spec; other
//     updates, and all of the controller's, keep the record.
func (r Recorder) record(req admission.Request, obj, old *object) (string, bool) {
	if req.Operation == admissionv1.Create {
		if v, ok := obj.Metadata.Annotations[Annotation]; ok && req.UserInfo.Username == r.Controller {
			return v, true
		}
		return Encode(req.UserInfo), true
	}
	prev, had := old.Metadata.Annotations[Annotation]
	if req.UserInfo.Username == r.Controller {
		return prev, had
	}
	switch req.Kind.Kind {
	case "VirtualMachine":
		if !reflect.DeepEqual(obj.Spec["dataVolumeTemplates"], old.Spec["dataVolumeTemplates"]) {
			return Encode(req.UserInfo), true
		}
	case "VirtualMachineRestore":
		if !reflect.DeepEqual(obj.Spec, old.Spec) {
			return Encode(req.UserInfo), true
		}
	}
	return prev, had
}
