package copytemplate

import (
	"context"
	"strings"
	"testing"

	templatev1 "github.com/openshift/api/template/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tekvirt/tekvirt/contracts/vmtemplate"
	"github.com/tekvirt/tekvirt/tasks/kube"
)

func TestRun(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	src := &templatev1.Template{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openshift", Name: "common", Labels: map[string]string{vmtemplate.TypeLabel: "base"}},
		Objects:    []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"${NAME}"}}`)}},
		Parameters: []templatev1.Parameter{{Name: "NAME", Required: true}},
	}
	other := &templatev1.Template{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "taken"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(src, other).Build()
	ctx := context.Background()
	p := Params{SourceName: "common", SourceNamespace: "openshift", TargetName: "mine", AllowReplace: "false", SetOwnerReference: "true",
		DefaultNamespace: "tenant", Owner: metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "pod-1", UID: "uid-1"}}
	res, err := Run(ctx, c, p)
	if err != nil || res.Name != "mine" || res.Namespace != "tenant" || res.Existed {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	got := &templatev1.Template{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "mine"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels[vmtemplate.TypeLabel] != "vm" || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("copy labels %v owners %v", got.Labels, got.OwnerReferences)
	}
	if res, err := Run(ctx, c, p); err != nil || !res.Existed {
		t.Errorf("rerun = %+v, %v; want the earlier copy found", res, err)
	}

	p.TargetName = "taken"
	if _, err := Run(ctx, c, p); err == nil || !strings.Contains(err.Error(), "template tenant/taken already exists and differs") {
		t.Errorf("over another template without allowReplace: %v", err)
	}
	p.AllowReplace = "true"
	if res, err := Run(ctx, c, p); err != nil || !res.Replaced {
		t.Errorf("with allowReplace = %+v, %v", res, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "taken"}, got); err != nil || len(got.Parameters) != 1 {
		t.Errorf("replaced template: %v, parameters %v", err, got.Parameters)
	}

	for name, tc := range map[string]struct {
		p    Params
		want string
	}{
		"no source":        {Params{AllowReplace: "false", SetOwnerReference: "false"}, "param sourceTemplateName is empty"},
		"missing source":   {Params{SourceName: "nope", AllowReplace: "false", SetOwnerReference: "false", DefaultNamespace: "tenant"}, "reading template tenant/nope"},
		"bad allowReplace": {Params{SourceName: "common", AllowReplace: "sure", SetOwnerReference: "false"}, `allowReplace "sure"`},
		"owner unknown":    {Params{SourceName: "common", SourceNamespace: "openshift", AllowReplace: "false", SetOwnerReference: "true", DefaultNamespace: "tenant"}, "POD_NAME"},
	} {
		if _, err := Run(ctx, c, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
