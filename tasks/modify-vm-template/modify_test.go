package modifytemplate

import (
	"context"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

func TestRun(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &templatev1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "mine"},
		Objects: []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"${NAME}"},
		  "spec":{"template":{"spec":{"domain":{"memory":{"guest":"256Mi"},"devices":{"disks":[{"name":"rootdisk","disk":{"bus":"virtio"}}]}}}}}}`)}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(tmpl).Build()
	ctx := context.Background()
	p := Params{
		TemplateName: "mine", DefaultNamespace: "tenant", CPUCores: "2", CPUSockets: "0", Memory: "512Mi",
		Arrays: map[string][]string{"templateLabels": {"team: blue"}, "disks": {`{"name":"rootdisk","disk":{"bus":"sata"}}`},
			"templateParameters": {`{"name":"NAME","required":true}`}},
	}
	for run := range 2 {
		res, err := Run(ctx, c, p)
		if err != nil || res.Name != "mine" || res.Namespace != "tenant" {
			t.Fatalf("run %d: %+v, %v", run, res, err)
		}
	}
	got := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "mine"}, got); err != nil {
		t.Fatal(err)
	}
	vm := string(got.Objects[0].Raw)
	for _, want := range []string{`"cpu":{"cores":2}`, `"memory":{"guest":"512Mi"}`, `"disks":[{"disk":{"bus":"sata"},"name":"rootdisk"}]`} {
		if !strings.Contains(vm, want) {
			t.Errorf("VM %s lacks %s", vm, want)
		}
	}
	if got.Labels["team"] != "blue" || len(got.Parameters) != 1 || !got.Parameters[0].Required {
		t.Errorf("labels %v parameters %+v (twice applied, once in effect)", got.Labels, got.Parameters)
	}

	for name, tc := range map[string]struct {
		p    Params
		want []string
	}{
		"no name": {Params{}, []string{"param templateName is empty"}},
		"bad values": {Params{TemplateName: "mine", CPUCores: "two", Memory: "lots", DeleteDisks: "maybe",
			Arrays: map[string][]string{"vmLabels": {"novalue"}, "disks": {`{"name":"d","bus":"sata"}`}, "volumes": {`{"containerDisk":{}}`}}},
			[]string{`cpuCores "two"`, `memory "lots"`, `deleteDisks "maybe"`, `vmLabels[0] "novalue" is not KEY:VALUE`, `disks[0] is not a valid v1.Disk: json: unknown field "bus"`, "volumes[0] has no name"}},
		"missing template": {Params{TemplateName: "nope", DefaultNamespace: "tenant"}, []string{"reading template tenant/nope"}},
	} {
		_, err := Run(ctx, c, tc.p)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %v, want %q", name, err, w)
			}
		}
	}

	if res, err := Run(ctx, c, Params{TemplateName: "mine", DefaultNamespace: "tenant", DeleteTemplate: "true"}); err != nil || !res.Deleted {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "mine"}, got); !apierrors.IsNotFound(err) {
		t.Errorf("template after deleteTemplate: %v", err)
	}
	if _, err := Run(ctx, c, Params{TemplateName: "mine", DefaultNamespace: "tenant", DeleteTemplate: "true"}); err != nil {
		t.Errorf("deleting again: %v", err)
	}
}
