package importdisk

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/images"
	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

func TestSourceParams(t *testing.T) {
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "half"}, Data: map[string][]byte{"accessKeyId": []byte("u")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"accessKeyId": []byte("u"), "secretKey": []byte("p")}},
	).Build()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		p       Params
		wantErr string
	}{
		"neither":       {Params{}, "exactly one of params url and registry"},
		"both":          {Params{URL: "http://x", Registry: "r"}, "exactly one"},
		"half a secret": {Params{URL: "http://x", SecretName: "half", Namespace: "ns"}, "needs accessKeyId and secretKey"},
		"no secret":     {Params{URL: "http://x", SecretName: "gone", Namespace: "ns"}, "credentials secret ns/gone"},
		"no configmap":  {Params{URL: "http://x", CertConfigMap: "gone", Namespace: "ns"}, "certificate ConfigMap ns/gone"},
	} {
		if _, err := Source(ctx, c, tc.p); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.wantErr)
		}
	}
	src, err := Source(ctx, c, Params{URL: "http://x/disk.img", SecretName: "creds", Namespace: "ns"})
	if err != nil || !strings.HasPrefix(src.(*images.HTTPSource).Header.Get("Authorization"), "Basic ") {
		t.Errorf("url with credentials: %+v %v", src, err)
	}
	reg, err := Source(ctx, c, Params{Registry: "docker://example.test/disk:1", SecretName: "creds", Namespace: "ns"})
	if err != nil || reg.(*images.RegistrySource).Ref != "example.test/disk:1" || reg.(*images.RegistrySource).Auth == nil {
		t.Errorf("registry with credentials: %+v %v", reg, err)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	raw := make([]byte, 1<<20)
	copy(raw, "boot")
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(raw)
	_ = w.Close()
	src := filepath.Join(t.TempDir(), "disk.img.gz")
	if err := os.WriteFile(src, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := Run(context.Background(), images.FileSource{Path: src}, Params{Dir: dir, Size: "2Mi"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Map()
	if m["format"] != "raw" || m["virtualSize"] != "1048576" || m["diskSize"] != "2097152" {
		t.Errorf("results %v", m)
	}
	if st, err := os.Stat(filepath.Join(dir, DiskFile)); err != nil || st.Size() != 2<<20 {
		t.Errorf("disk.img: %v %v", st, err)
	}
	if !strings.Contains(out.String(), "imported raw image (gz)") || !strings.Contains(out.String(), "progress: 100.00%") {
		t.Errorf("output:\n%s", out.String())
	}
	if _, err := Run(context.Background(), images.FileSource{Path: src}, Params{Dir: dir, Capacity: "512Ki"}, &out); err == nil || !strings.Contains(err.Error(), "exceeds the volume's") {
		t.Errorf("too small a volume: err = %v", err)
	}
	if _, err := Run(context.Background(), images.FileSource{Path: src}, Params{Dir: dir, Size: "lots"}, &out); err == nil || !strings.Contains(err.Error(), `param size "lots"`) {
		t.Errorf("bad size: err = %v", err)
	}
}

func TestFailureExitCodesAndBlank(t *testing.T) {
	if c := (&result.Failure{Err: fmt.Errorf("x: %w", images.ErrChecksum)}).ExitCode(); c != datastep.PermanentExitCode {
		t.Errorf("checksum failure exit code %d", c)
	}
	if c := (&result.Failure{Err: &images.SourceError{Err: io.ErrUnexpectedEOF}}).ExitCode(); c != 1 {
		t.Errorf("network failure exit code %d, want 1 (retried)", c)
	}
	dir := t.TempDir()
	var out bytes.Buffer
	res, err := Blank(Params{Dir: dir, Size: "1Gi"}, &out)
	if err != nil || res.DiskSize != 1<<30 {
		t.Fatalf("Blank = %+v, %v", res, err)
	}
	if st, err := os.Stat(filepath.Join(dir, DiskFile)); err != nil || st.Size() != 1<<30 {
		t.Fatalf("blank disk: %v %v", st, err)
	}
	if _, err := Blank(Params{Dir: dir}, &out); err == nil {
		t.Error("blank without a size accepted")
	}
}

// TestDigestOnly is a DataImportCron's poll: the registry's credentials
// come from the environment (the cron's secretRef, given by the kubelet)
// and only the digest is read.
func TestDigestOnly(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/os/fedora:1"
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := crane.Push(img, ref, crane.WithAuth(&authn.Basic{Username: "user", Password: "pass"})); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	ctx := context.Background()
	p := Params{Registry: "docker://" + ref, DigestOnly: true}
	for name, tc := range map[string]struct {
		user, pass string
		want       string // the digest, or a part of the error
	}{
		"credentials from the environment": {"user", "pass", want.String()},
		"wrong credentials":                {"user", "nope", "(401); give a secretRef"},
	} {
		t.Setenv(datastep.AccessKeyEnv, tc.user)
		t.Setenv(datastep.SecretKeyEnv, tc.pass)
		src, err := Source(ctx, nil, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Digest(ctx, src)
		if got != tc.want && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, tc.want)
		}
	}
	if _, err := Digest(ctx, &images.HTTPSource{URL: "http://x/disk.img"}); err == nil || !strings.Contains(err.Error(), "give param registry") {
		t.Errorf("an url has no digest: %v", err)
	}
}
