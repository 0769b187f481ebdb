package ocibuild

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

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
	tr := tar.NewReader(mutate.Extract(a))
	seen := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
	}
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
