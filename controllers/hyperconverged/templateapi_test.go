package hyperconverged

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestTemplateAPIInstalledWhereAbsent: on a cluster without the Template
// API the operator installs its CRD (labelled as its own) and applying it
// again changes nothing; a cluster that serves the API itself is left
// alone, as is a CRD of that name someone else manages.
func TestTemplateAPIInstalledWhereAbsent(t *testing.T) {
	cfg := testenv.Start(t, filepath.Join("..", "config", "crd", "hco.kubevirt.io_hyperconvergeds.yaml"))
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c}
	ctx := context.Background()
	for i := range 2 {
		from, err := r.ensureTemplateAPI(ctx)
		if err != nil || from != "tekvirt's CustomResourceDefinition" {
			t.Fatalf("run %d: %q, %v", i, from, err)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: TemplateCRDName}, crd); err != nil || crd.Labels[ManagedByLabel] != ManagedBy {
		t.Fatalf("CRD %v labels %v", err, crd.Labels)
	}

	// Someone else's CRD of that name: left as it is.
	// A patch, not an update: the apiserver's own controllers write the
	// CRD's status right after it is created.
	unmanaged := crd.DeepCopy()
	delete(unmanaged.Labels, ManagedByLabel)
	if err := c.Patch(ctx, unmanaged, client.MergeFrom(crd)); err != nil {
		t.Fatal(err)
	}
	if from, err := r.ensureTemplateAPI(ctx); err != nil || !strings.Contains(from, "does not manage") {
		t.Errorf("unmanaged CRD: %q, %v", from, err)
	}

	// OpenShift: no CRD, the API served by its own server.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "template.openshift.io", Version: "v1", Kind: "Template"}, meta.RESTScopeNamespace)
	openshift := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).Build()}
	if from, err := openshift.ensureTemplateAPI(ctx); err != nil || from != "the cluster's own API" {
		t.Errorf("served API: %q, %v", from, err)
	}
}
