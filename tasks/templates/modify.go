package templates

import (
	"encoding/json"
	"fmt"
	"maps"

	templatev1 "github.com/openshift/api/template/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "kubevirt.io/api/core/v1"
)

// Modification is what modify-vm-template changes in a template and in
// its VirtualMachine. The VM is edited as JSON, so parameter references in
// fields of other types (cores: ${{CPU_CORES}}) survive.
type Modification struct {
	// CPU topology; 0 leaves a value as it is.
	CPUSockets, CPUCores, CPUThreads uint32
	// Memory sets the guest's memory: memory.guest when the VM sizes it
	// there, and resources.requests.memory when it sizes it there or
	// nowhere (kubevirt-tekton-tasks sets the request only).
	Memory *resource.Quantity

	TemplateLabels, TemplateAnnotations map[string]string
	VMLabels, VMAnnotations             map[string]string

	// Disks, Volumes and DataVolumeTemplates replace the entry of the same
	// name, or are appended; the deletes happen first.
	Disks               []v1.Disk
	Volumes             []v1.Volume
	DataVolumeTemplates []v1.DataVolumeTemplateSpec
	DeleteDisks         bool
	DeleteVolumes       bool
	// DeleteDataVolumeTemplates drops them with the volumes using them and
	// those volumes' disks.
	DeleteDataVolumeTemplates bool

	// Parameters replace the one of the same name, or are appended, after
	// DeleteParameters removed all.
	Parameters       []templatev1.Parameter
	DeleteParameters bool
}

// Apply changes t in place. t must make exactly one VirtualMachine.
func (m Modification) Apply(t *templatev1.Template) error {
	t.Labels = merge(t.Labels, m.TemplateLabels)
	t.Annotations = merge(t.Annotations, m.TemplateAnnotations)
	if m.DeleteParameters {
		t.Parameters = nil
	}
	for _, p := range m.Parameters {
		t.Parameters = upsert(t.Parameters, p, func(e templatev1.Parameter) string { return e.Name })
	}
	i, vm, err := vmObject(t)
	if err != nil {
		return err
	}
	if err := m.applyVM(vm); err != nil {
		return fmt.Errorf("template %s/%s objects[%d]: %w", t.Namespace, t.Name, i, err)
	}
	data, err := json.Marshal(vm)
	if err != nil {
		return err
	}
	t.Objects[i] = runtime.RawExtension{Raw: data}
	return nil
}

// vmObject finds the template's one VirtualMachine.
func vmObject(t *templatev1.Template) (int, map[string]any, error) {
	found, at := 0, -1
	var vm map[string]any
	for i, raw := range t.Objects {
		obj := map[string]any{}
		if err := json.Unmarshal(objectJSON(raw), &obj); err != nil {
			return 0, nil, fmt.Errorf("template %s/%s objects[%d] is not a JSON object: %w", t.Namespace, t.Name, i, err)
		}
		if obj["kind"] == "VirtualMachine" && obj["apiVersion"] == v1.GroupVersion.String() {
			found, at, vm = found+1, i, obj
		}
	}
	if found != 1 {
		return 0, nil, fmt.Errorf("template %s/%s has %d kubevirt.io/v1 VirtualMachines, want exactly one", t.Namespace, t.Name, found)
	}
	return at, vm, nil
}

var (
	domainPath = []string{"spec", "template", "spec", "domain"}
	vmiPath    = []string{"spec", "template", "spec"}
)

func (m Modification) applyVM(vm map[string]any) error {
	for _, step := range []func(map[string]any) error{m.applyMetadata, m.applyCPU, m.applyMemory, m.applyLists} {
		if err := step(vm); err != nil {
			return err
		}
	}
	return nil
}

func (m Modification) applyMetadata(vm map[string]any) error {
	for _, kv := range []struct {
		path []string
		add  map[string]string
	}{{[]string{"metadata", "labels"}, m.VMLabels}, {[]string{"metadata", "annotations"}, m.VMAnnotations}} {
		if len(kv.add) == 0 {
			continue
		}
		cur, _, err := unstructured.NestedStringMap(vm, kv.path...)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedStringMap(vm, merge(cur, kv.add), kv.path...); err != nil {
			return err
		}
	}
	return nil
}

func (m Modification) applyCPU(vm map[string]any) error {
	for field, n := range map[string]uint32{"sockets": m.CPUSockets, "cores": m.CPUCores, "threads": m.CPUThreads} {
		if n > 0 {
			if err := unstructured.SetNestedField(vm, int64(n), append(domainPath, "cpu", field)...); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m Modification) applyMemory(vm map[string]any) error {
	if m.Memory == nil {
		return nil
	}
	guestPath, requestPath := append(domainPath, "memory", "guest"), append(domainPath, "resources", "requests", "memory")
	guest, hasGuest, _ := unstructured.NestedFieldNoCopy(vm, guestPath...)
	_, hasRequest, _ := unstructured.NestedFieldNoCopy(vm, requestPath...)
	if hasGuest && guest != nil {
		if err := unstructured.SetNestedField(vm, m.Memory.String(), guestPath...); err != nil {
			return err
		}
	}
	if hasRequest || !hasGuest {
		return unstructured.SetNestedField(vm, m.Memory.String(), requestPath...)
	}
	return nil
}

func (m Modification) applyLists(vm map[string]any) error {
	if m.DeleteDataVolumeTemplates {
		if err := dropDataVolumeTemplates(vm); err != nil {
			return err
		}
	}
	for _, l := range []struct {
		path    []string
		clear   bool
		entries any
	}{
		{append(domainPath, "devices", "disks"), m.DeleteDisks, m.Disks},
		{append(vmiPath, "volumes"), m.DeleteVolumes, m.Volumes},
		{[]string{"spec", "dataVolumeTemplates"}, false, m.DataVolumeTemplates},
	} {
		if err := upsertNamed(vm, l.path, l.clear, l.entries); err != nil {
			return err
		}
	}
	return nil
}

// upsertNamed clears the list at path when asked, then puts each entry in
// place of the one of the same name, or at the end.
func upsertNamed(vm map[string]any, path []string, clear bool, entries any) error {
	list, _, err := unstructured.NestedSlice(vm, path...)
	if err != nil {
		return err
	}
	if clear {
		list = []any{}
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	var add []map[string]any
	if err := json.Unmarshal(data, &add); err != nil {
		return err
	}
	if !clear && len(add) == 0 {
		return nil
	}
	for _, e := range add {
		list = upsert(list, any(e), func(x any) string {
			if obj, ok := x.(map[string]any); ok {
				if name, ok := obj["name"].(string); ok {
					return name
				}
				if meta, ok := obj["metadata"].(map[string]any); ok {
					name, _ := meta["name"].(string)
					return name
				}
			}
			return ""
		})
	}
	return unstructured.SetNestedSlice(vm, list, path...)
}

// dropDataVolumeTemplates removes the VM's DataVolume templates, the
// volumes that use them and those volumes' disks.
func dropDataVolumeTemplates(vm map[string]any) error {
	dvts, _, err := unstructured.NestedSlice(vm, "spec", "dataVolumeTemplates")
	if err != nil {
		return err
	}
	dvs := map[string]bool{}
	for _, d := range dvts {
		if name, _, _ := unstructured.NestedString(asMap(d), "metadata", "name"); name != "" {
			dvs[name] = true
		}
	}
	volumes, _, err := unstructured.NestedSlice(vm, append(vmiPath, "volumes")...)
	if err != nil {
		return err
	}
	gone := map[string]bool{}
	var keep []any
	for _, v := range volumes {
		if dv, _, _ := unstructured.NestedString(asMap(v), "dataVolume", "name"); dvs[dv] {
			name, _, _ := unstructured.NestedString(asMap(v), "name")
			gone[name] = true
			continue
		}
		keep = append(keep, v)
	}
	disks, _, err := unstructured.NestedSlice(vm, append(domainPath, "devices", "disks")...)
	if err != nil {
		return err
	}
	var keepDisks []any
	for _, d := range disks {
		if name, _, _ := unstructured.NestedString(asMap(d), "name"); !gone[name] {
			keepDisks = append(keepDisks, d)
		}
	}
	if err := unstructured.SetNestedSlice(vm, nonNil(keep), append(vmiPath, "volumes")...); err != nil {
		return err
	}
	if err := unstructured.SetNestedSlice(vm, nonNil(keepDisks), append(domainPath, "devices", "disks")...); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(vm, []any{}, "spec", "dataVolumeTemplates")
}

func nonNil(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func merge(dst, add map[string]string) map[string]string {
	if len(add) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]string{}
	}
	maps.Copy(dst, add)
	return dst
}

func upsert[T any](list []T, e T, name func(T) string) []T {
	for i := range list {
		if name(list[i]) == name(e) {
			list[i] = e
			return list
		}
	}
	return append(list, e)
}
