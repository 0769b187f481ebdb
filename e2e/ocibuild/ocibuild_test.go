package ocibuild

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestBuildIsReproducibleAndHoldsFiles(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := Spec{
		Files: map[string]File{
			"/ko-app/app": {Source: bin, Mode: 0o755},
			"/bin/app":    {Link: "/ko-app/app"},
			"/tmp":        {Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{"/ko-app/app"},
	}
	a, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("two builds of the same spec differ: %s vs %s", da, db)
	}
	cfg, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != "/ko-app/app" {
		t.Fatalf("entrypoint = %v", got)
	}
	seen := entries(t, a)
	if h := seen["ko-app/app"]; h == nil || h.Mode != 0o755 || h.Size != 8 {
		t.Fatalf("binary entry = %+v", h)
	}
	if h := seen["bin/app"]; h == nil || h.Linkname != "/ko-app/app" {
		t.Fatalf("symlink entry = %+v", h)
	}
	if h := seen["ko-app"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Fatalf("parent dir entry missing: %+v", seen)
	}
}

func TestBaseLayerUnderFiles(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.so")
	if err := os.WriteFile(lib, []byte("library"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base.tar.gz")
	if err := WriteLayer(base, map[string]File{"/usr/lib/lib.so": {Source: lib}, "/lib": {Link: "usr/lib"}}); err != nil {
		t.Fatal(err)
	}
	img, err := Build(Spec{Base: base, Files: map[string]File{"/ko-app/app": {Source: lib, Mode: 0o755}}})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers %d, %v; want the base and the files", len(layers), err)
	}
	seen := entries(t, img)
	for _, want := range []string{"usr/lib/lib.so", "lib", "ko-app/app"} {
		if seen[want] == nil {
			t.Errorf("image has no %s: %v", want, seen)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("WriteLayer left files beside the layer: %v", entries)
	}
}

// entries are the image's flattened filesystem entries by name.
func entries(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	tr := tar.NewReader(mutate.Extract(img))
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return seen
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
	}
}
