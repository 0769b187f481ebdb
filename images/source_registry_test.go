package images

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func pushFiles(t *testing.T, host, repo string, files map[string][]byte, opts ...crane.Option) string {
	t.Helper()
	img, err := crane.Image(files)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/" + repo + ":v1"
	if err := crane.Push(img, ref, opts...); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestRegistrySourceImports(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	raw := rawFixture()
	good := pushFiles(t, host, "disk", map[string][]byte{"disk/image.img.gz": gz(t, raw), "etc/motd": []byte("hi")})
	empty := pushFiles(t, host, "nodisk", map[string][]byte{"etc/motd": []byte("hi")})

	src := &RegistrySource{Registry: Registry{Ref: good}}
	rc, size, err := src.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "disk.img")
	res, err := Import(context.Background(), rc, size, Target{Path: disk}, Options{})
	rc.Close()
	if err != nil || res.Format != Raw || !strings.HasPrefix(src.Digest, "sha256:") {
		t.Fatalf("import = %+v, %v (digest %q)", res, err, src.Digest)
	}
	checkDisk(t, disk, raw)

	if _, _, err := (&RegistrySource{Registry: Registry{Ref: empty}}).Open(context.Background()); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no disk file under /disk/") {
		t.Errorf("image without /disk/: err = %v", err)
	}
	if _, _, err := (&RegistrySource{Registry: Registry{Ref: host + "/missing:v1"}}).Open(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing image: err = %v", err)
	}

}

func TestRegistrySourceCustomCA(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	ref := pushFiles(t, strings.TrimPrefix(srv.URL, "https://"), "disk", map[string][]byte{"disk/d.img": []byte("disk")}, crane.WithTransport(srv.Client().Transport))
	if _, _, err := (&RegistrySource{Registry: Registry{Ref: ref}}).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: err = %v, want a certificate error", err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	rc, size, err := (&RegistrySource{Registry: Registry{Ref: ref, CA: ca}}).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "disk" || size != 4 {
		t.Errorf("read %q (%d)", b, size)
	}
}

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

func TestRegistrySourceHeadLogsIn(t *testing.T) {
	host := privateRegistry(t)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The test pushes with the credentials the reader must use.
	if err := crane.Push(img, host+"/private/os:1", crane.WithAuth(&authn.Basic{Username: "user", Password: "pass"})); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	for name, tc := range map[string]struct {
		ref  string
		auth authn.Authenticator
		want string // a digest, or a part of the error
		is   error
	}{
		"right login":    {"private/os:1", &authn.Basic{Username: "user", Password: "pass"}, want.String(), nil},
		"no login":       {"private/os:1", nil, "the registry wants credentials it accepts (401); give a secretRef", ErrUnauthorized},
		"wrong password": {"private/os:1", &authn.Basic{Username: "user", Password: "nope"}, "(401)", ErrUnauthorized},
		"no such image":  {"public/none:1", nil, "public/none:1", ErrNotFound},
	} {
		got, err := (&RegistrySource{Registry: Registry{Ref: host + "/" + tc.ref, Auth: tc.auth}}).Head(context.Background())
		switch {
		case tc.is == nil:
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %s", name, got, err, tc.want)
			}
		case !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q, %v; want %v with %q", name, got, err, tc.is, tc.want)
		}
	}
}
