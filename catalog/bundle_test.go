package catalog_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"github.com/tektoncd/pipeline/pkg/remote/oci"

	"github.com/tekvirt/tekvirt/catalog"
)

// TestBundlesReadByTekton pushes the bundles to a registry and reads each
// back with Tekton's own bundle reader: every task and pipeline, as
// published (version label, step image), under
// tekvirt/bundles/<name>:<version>.
func TestBundlesReadByTekton(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	refs, err := catalog.PushBundles(host, testPublication)
	if err != nil {
		t.Fatal(err)
	}
	ts, ps := contents(t)
	if len(refs) != len(ts)+len(ps) {
		t.Errorf("%d bundles, want one per task and pipeline (%d)", len(refs), len(ts)+len(ps))
	}
	get := func(kind, name string) map[string]string {
		t.Helper()
		ref := host + "/" + catalog.BundleRepository + "/" + name + ":" + testPublication.Version
		if !strings.HasPrefix(refs[name], host+"/"+catalog.BundleRepository+"/"+name+"@sha256:") {
			t.Errorf("%s: pushed as %q", name, refs[name])
		}
		r := oci.NewResolver(ref, authn.DefaultKeychain)
		listed, err := r.List(context.Background())
		if err != nil || len(listed) != 1 || listed[0].Kind != kind || listed[0].Name != name {
			t.Fatalf("%s lists %+v (%v), want one %s %s", ref, listed, err, kind, name)
		}
		obj, _, err := r.Get(context.Background(), kind, name)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		switch o := obj.(type) {
		case *pipelinev1.Task:
			if o.Spec.Steps[0].Image != testImage {
				t.Errorf("%s: step image %q", ref, o.Spec.Steps[0].Image)
			}
			return o.Labels
		case *pipelinev1.Pipeline:
			return o.Labels
		default:
			t.Fatalf("%s holds a %T", ref, obj)
		}
		return nil
	}
	for _, task := range ts {
		if v := get("task", task.Name)[catalog.VersionLabel]; v != testPublication.Version {
			t.Errorf("task %s: version %q", task.Name, v)
		}
	}
	for _, p := range ps {
		if v := get("pipeline", p.Name)[catalog.VersionLabel]; v != testPublication.Version {
			t.Errorf("pipeline %s: version %q", p.Name, v)
		}
	}
}
