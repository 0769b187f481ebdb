package images

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
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

	src := &RegistrySource{Ref: good}
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

	if _, _, err := (&RegistrySource{Ref: empty}).Open(context.Background()); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no disk file under /disk/") {
		t.Errorf("image without /disk/: err = %v", err)
	}
	if _, _, err := (&RegistrySource{Ref: host + "/missing:v1"}).Open(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing image: err = %v", err)
	}

}

func TestRegistrySourceCustomCA(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	ref := pushFiles(t, strings.TrimPrefix(srv.URL, "https://"), "disk", map[string][]byte{"disk/d.img": []byte("disk")}, crane.WithTransport(srv.Client().Transport))
	if _, _, err := (&RegistrySource{Ref: ref}).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: err = %v, want a certificate error", err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	rc, size, err := (&RegistrySource{Ref: ref, CA: ca}).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "disk" || size != 4 {
		t.Errorf("read %q (%d)", b, size)
	}
}
