package vmwebhook

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/tekvirt/tekvirt/controllers/config"
)

// graceField is the VMI's termination grace period, which a stop through
// the subresource API may set.
const graceField = "terminationGracePeriodSeconds"

// immutableHint says, per kind, what to do instead of changing the spec.
var immutableHint = map[string]string{
	"VirtualMachineInstance": "change its VirtualMachine and restart it",
	"DataVolume":             "create another DataVolume",

	"VirtualMachineInstanceMigration": "create another migration",
}

// specUnchanged refuses an update that changes the spec of a
// VirtualMachineInstance or DataVolume, naming the first top-level field
// that differs: as in KubeVirt, a running VMI is changed through its
// VirtualMachine and a restart; as in CDI, a DataVolume asks for one
// import or clone, and another source is another DataVolume. The one
// exceptions are KubeVirt's too: the controller, serving a stop with a
// grace period, shortens a VMI's terminationGracePeriodSeconds, and,
// serving addvolume and removevolume, adds and removes hotpluggable
// volumes and their disks.
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
	if req.Kind.Kind == "VirtualMachineInstance" && req.UserInfo.Username == config.ControllerUser {
		delete(obj.Spec, graceField)
		delete(old.Spec, graceField)
		withoutHotplug(obj.Spec, old.Spec)
	}
	if reflect.DeepEqual(obj.Spec, old.Spec) {
		return nil
	}
	fields := map[string]any{}
	maps.Copy(fields, obj.Spec)
	maps.Copy(fields, old.Spec)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !reflect.DeepEqual(obj.Spec[k], old.Spec[k]) {
			return fmt.Errorf("spec.%s of %s %s/%s cannot change after creation; %s", k, req.Kind.Kind, req.Namespace, req.Name, immutableHint[req.Kind.Kind])
		}
	}
	return nil
}

// withoutHotplug takes the hotpluggable volumes, and the disks of those,
// out of both VMI specs (JSON), so that only the rest is compared.
func withoutHotplug(specs ...map[string]any) {
	hot := hotplugged(specs)
	if len(hot) == 0 {
		return
	}
	drop := func(list any) any {
		items, ok := list.([]any)
		if !ok {
			return list
		}
		var out []any
		for _, it := range items {
			m, _ := it.(map[string]any)
			if name, _ := m["name"].(string); !hot[name] {
				out = append(out, it)
			}
		}
		return out
	}
	for _, spec := range specs {
		if _, ok := spec["volumes"]; ok {
			spec["volumes"] = drop(spec["volumes"])
		}
		domain, _ := spec["domain"].(map[string]any)
		devices, _ := domain["devices"].(map[string]any)
		if _, ok := devices["disks"]; ok {
			devices["disks"] = drop(devices["disks"])
		}
	}
}

// hotplugged names the volumes hotpluggable in every spec that has them:
// a boot volume turned into a hotplugged one is still a change.
func hotplugged(specs []map[string]any) map[string]bool {
	hot := map[string]bool{}
	for _, spec := range specs {
		vols, _ := spec["volumes"].([]any)
		for _, v := range vols {
			vol, _ := v.(map[string]any)
			name, _ := vol["name"].(string)
			if was, seen := hot[name]; !seen || was {
				hot[name] = isHotplug(vol)
			}
		}
	}
	for name, isHot := range hot {
		if !isHot {
			delete(hot, name)
		}
	}
	return hot
}

func isHotplug(vol map[string]any) bool {
	for _, src := range []string{"dataVolume", "persistentVolumeClaim"} {
		if s, ok := vol[src].(map[string]any); ok && s["hotpluggable"] == true {
			return true
		}
	}
	return false
}
