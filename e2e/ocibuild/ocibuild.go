package ocibuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of an image's single layer.
type File struct {
	// Source is a file on this machine; empty for a directory or a symlink.
	Source string
	// Mode of the entry in the image (0755 for binaries).
	Mode int64
	// Link, when set, makes the entry a symlink to this target.
	Link string
	// Dir marks a directory entry.
	Dir bool
}

// Spec describes one image.
type Spec struct {
	// Base, when set, is a gzipped tar layer (see WriteLayer) under Files,
	// for content too large to pack again on every build.
	Base string
	// Files maps absolute paths in the image to their content.
	Files      map[string]File
	Entrypoint []string
	// Cmd is the default arguments (Dockerfile's CMD).
	Cmd  []string
	Env  []string
	User string
}

// Build assembles the image described by spec. The layer is held in memory;
// the largest image here is a ~80 MB controller binary.
func Build(spec Spec) (v1.Image, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, spec.Files); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	// BestSpeed: the layers are static binaries pushed over loopback, where
	// gzip time, not size, is what a user waits for.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("reading layer: %w", err)
	}
	layers := []v1.Layer{layer}
	if spec.Base != "" {
		base, err := tarball.LayerFromFile(spec.Base)
		if err != nil {
			return nil, fmt.Errorf("reading base layer %s: %w", spec.Base, err)
		}
		layers = []v1.Layer{base, layer}
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint, cfg.Config.Cmd = spec.Entrypoint, spec.Cmd
	cfg.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/ko-app"}, spec.Env...)
	cfg.Config.User = spec.User
	return mutate.ConfigFile(img, cfg)
}

// Push builds spec and pushes it as ref, returning the digest reference.
func Push(spec Spec, ref string) (string, error) {
	img, err := Build(spec)
	if err != nil {
		return "", fmt.Errorf("building image %s: %w", ref, err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img); err != nil {
		return "", fmt.Errorf("pushing image %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().Digest(d.String()).String(), nil
}

// WriteLayer packs files as a gzipped tar layer at path (written beside
// it and renamed, so an interrupted write leaves no layer), for Spec.Base.
func WriteLayer(path string, files map[string]File) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".layer-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	zw, err := gzip.NewWriterLevel(tmp, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if err := writeTar(zw, files); err != nil {
		tmp.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeTar(w io.Writer, files map[string]File) error {
	tw := tar.NewWriter(w)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	dirs := map[string]bool{}
	for _, p := range paths {
		if err := writeParents(tw, p, dirs); err != nil {
			return err
		}
		if err := writeEntry(tw, p, files[p]); err != nil {
			return fmt.Errorf("adding %s to layer: %w", p, err)
		}
		if files[p].Dir {
			dirs[p] = true
		}
	}
	return tw.Close()
}

func writeParents(tw *tar.Writer, p string, done map[string]bool) error {
	d := path.Dir(p)
	if d == "/" || d == "." || done[d] {
		return nil
	}
	if err := writeParents(tw, d, done); err != nil {
		return err
	}
	done[d] = true
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
}

func writeEntry(tw *tar.Writer, p string, f File) error {
	hdr := &tar.Header{Name: p[1:], Mode: f.Mode, ModTime: time.Unix(0, 0)}
	switch {
	case f.Dir:
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		if hdr.Mode == 0 {
			hdr.Mode = 0o755
		}
		return tw.WriteHeader(hdr)
	case f.Link != "":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
		return tw.WriteHeader(hdr)
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
	if hdr.Mode == 0 {
		hdr.Mode = 0o644
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, src)
	return err
}
