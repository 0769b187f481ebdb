package templates

import (
	"encoding/json"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "kubevirt.io/api/core/v1"
)

func vmOf(t *testing.T, tmpl *templatev1.Template) map[string]any {
	t.Helper()
	_, vm, err := vmObject(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func jsonAt(t *testing.T, v any, path ...string) string {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return "<missing>"
		}
		v = m[p]
	}
	data, _ := json.Marshal(v)
	return string(data)
}

func TestModify(t *testing.T) {
	tmpl := vmTemplate()
	tmpl.Objects[0].Raw = []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"${NAME}","labels":{"app":"x"}},
	  "spec":{"dataVolumeTemplates":[{"metadata":{"name":"${NAME}"},"spec":{"sourceRef":{"kind":"DataSource","name":"old"}}}],
	    "template":{"spec":{"domain":{"cpu":{"cores":"${{CPU_CORES}}"},"memory":{"guest":"1Gi"},
	      "devices":{"disks":[{"name":"rootdisk","disk":{"bus":"virtio"}},{"name":"cloudinit","disk":{"bus":"virtio"}}]}},
	      "volumes":[{"name":"rootdisk","dataVolume":{"name":"${NAME}"}},{"name":"cloudinit","cloudInitNoCloud":{"userData":"x"}}]}}}}`)
	m := Modification{
		CPUSockets: 2, Memory: ptr(resource.MustParse("2Gi")),
		TemplateLabels: map[string]string{"team": "blue"}, VMAnnotations: map[string]string{"note": "hi"}, VMLabels: map[string]string{"app": "y"},
		Disks:      []v1.Disk{{Name: "rootdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusSATA}}}, {Name: "extra"}},
		Parameters: []templatev1.Parameter{{Name: "MEMORY", Value: "4Gi"}, {Name: "NEW", Value: "n"}},
	}
	if err := m.Apply(tmpl); err != nil {
		t.Fatal(err)
	}
	vm := vmOf(t, tmpl)
	for path, want := range map[string]string{
		"spec.template.spec.domain.cpu":           `{"cores":"${{CPU_CORES}}","sockets":2}`,
		"spec.template.spec.domain.memory":        `{"guest":"2Gi"}`,
		"spec.template.spec.domain.resources":     `null`,
		"spec.template.spec.domain.devices.disks": `[{"disk":{"bus":"sata"},"name":"rootdisk"},{"disk":{"bus":"virtio"},"name":"cloudinit"},{"name":"extra"}]`,
		"metadata.labels":                         `{"app":"y"}`,
		"metadata.annotations":                    `{"note":"hi"}`,
		"spec.dataVolumeTemplates.0":              `<missing>`,
	} {
		if got := jsonAt(t, vm, strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	if tmpl.Labels["team"] != "blue" || len(tmpl.Parameters) != 9 || tmpl.Parameters[4].Value != "4Gi" || tmpl.Parameters[8].Name != "NEW" {
		t.Errorf("template labels %v parameters %+v", tmpl.Labels, tmpl.Parameters)
	}

	// Deletes: the DataVolume templates go with their volumes and disks.
	del := Modification{DeleteDataVolumeTemplates: true, DeleteParameters: true,
		Volumes: []v1.Volume{{Name: "extra", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "new"}}}}}
	if err := del.Apply(tmpl); err != nil {
		t.Fatal(err)
	}
	vm = vmOf(t, tmpl)
	for path, want := range map[string]string{
		"spec.dataVolumeTemplates":                `[]`,
		"spec.template.spec.volumes":              `[{"cloudInitNoCloud":{"userData":"x"},"name":"cloudinit"},{"dataVolume":{"name":"new"},"name":"extra"}]`,
		"spec.template.spec.domain.devices.disks": `[{"disk":{"bus":"virtio"},"name":"cloudinit"},{"name":"extra"}]`,
	} {
		if got := jsonAt(t, vm, strings.Split(path, ".")...); got != want {
			t.Errorf("after deletes %s = %s, want %s", path, got, want)
		}
	}
	if len(tmpl.Parameters) != 0 {
		t.Errorf("parameters left: %+v", tmpl.Parameters)
	}

	// Memory on a VM sized by its request only, or not at all.
	tmpl.Objects[0].Raw = []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"x"},"spec":{"template":{"spec":{"domain":{"devices":{}}}}}}`)
	if err := (Modification{Memory: ptr(resource.MustParse("512Mi"))}).Apply(tmpl); err != nil {
		t.Fatal(err)
	}
	if got := jsonAt(t, vmOf(t, tmpl), "spec", "template", "spec", "domain", "resources"); got != `{"requests":{"memory":"512Mi"}}` {
		t.Errorf("memory on an unsized VM: %s", got)
	}
}

func TestModifyNeedsOneVM(t *testing.T) {
	two := vmTemplate()
	two.Objects = append(two.Objects, two.Objects[0])
	none := vmTemplate()
	none.Objects = []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}}
	for name, tmpl := range map[string]*templatev1.Template{"two VMs": two, "no VM": none} {
		if err := (Modification{CPUCores: 1}).Apply(tmpl); err == nil || !strings.Contains(err.Error(), "want exactly one") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }
