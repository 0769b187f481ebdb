package dataimportcron

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// privateRegistry serves an in-memory registry whose repositories under
// private/ need basic auth user:pass, as a private registry would.
func privateRegistry(t *testing.T) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/private/") {
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestRegistryDigestLogsInWithTheSecret(t *testing.T) {
	host := privateRegistry(t)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The test pushes with the same credentials the cron must use.
	if err := crane.Push(img, host+"/private/os:1", crane.WithAuth(basic("user", "pass"))); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	secret := func(name, user, pass string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Data: map[string][]byte{"accessKeyId": []byte(user), "secretKey": []byte(pass)}}
	}
	reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(secret("good", "user", "pass"), secret("wrong", "user", "nope"), secret("empty", "", "")).Build()
	d := &RegistryDigest{Client: reader}
	for name, tc := range map[string]struct {
		secret string
		want   string // a digest, or a part of the error
	}{
		"right secret":   {"good", want.String()},
		"no secret":      {"", "the registry wants credentials it accepts (401): set spec.template.spec.source.registry.secretRef"},
		"wrong password": {"wrong", "(401)"},
		"missing secret": {"absent", `credentials secret ns/absent: secrets "absent" not found`},
		"secret no keys": {"empty", "credentials secret ns/empty needs accessKeyId and secretKey"},
	} {
		url := "docker://" + host + "/private/os:1"
		c := &cdiv1.DataImportCron{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cron"}, Spec: cdiv1.DataImportCronSpec{
			Template: cdiv1.DataVolume{Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{
				Registry: &cdiv1.DataVolumeSourceRegistry{URL: &url, SecretRef: &tc.secret}}}}}}
		got, err := d.Read(context.Background(), c)
		switch {
		case strings.HasPrefix(tc.want, "sha256:"):
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %s", name, got, err, tc.want)
			}
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q, %v; want an error with %q", name, got, err, tc.want)
		}
	}
}

func basic(user, pass string) *authn.Basic { return &authn.Basic{Username: user, Password: pass} }
