package vmwebhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// specUnchanged refuses an update that changes the spec of a
// VirtualMachineInstance or DataVolume, naming the first top-level field
// that differs: as in KubeVirt, a running VMI is changed through its
// VirtualMachine and a restart; as in CDI, a DataVolume asks for one
// import or clone, and another source is another DataVolume.
var immutableHint = map[string]string{
	"VirtualMachineInstance": "change its VirtualMachine and restart it",
	"DataVolume":             "create another DataVolume",
}

func specUnchanged(req admission.Request) error {
	var obj, old struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err)
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return fmt.Errorf("decoding the stored %s: %w", req.Kind.Kind, err)
	}
	if reflect.DeepEqual(obj.Spec, old.Spec) {
		return nil
	}
	keys := map[string]bool{}
	for k := range obj.Spec {
		keys[k] = true
	}
	for k := range old.Spec {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if !reflect.DeepEqual(obj.Spec[k], old.Spec[k]) {
			return fmt.Errorf("spec.%s of %s %s/%s cannot change after creation; %s", k, req.Kind.Kind, req.Namespace, req.Name, immutableHint[req.Kind.Kind])
		}
	}
	return nil
}
