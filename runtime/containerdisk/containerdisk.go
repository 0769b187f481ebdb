package containerdisk

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/tekvirt/tekvirt/images"
)

// DiskDir is where a containerDisk image keeps its disk, as in KubeVirt.
const DiskDir = "/disk/"

// ErrNotFound marks an image or file that does not exist: retrying will not help.
var ErrNotFound = errors.New("not found")

// ErrTooLarge marks an image whose files would take more than the cache
// allows one image: retrying will not help.
var ErrTooLarge = errors.New("too large")

// Cache is the node's store of extracted containerDisks, one directory per
// image digest.
type Cache struct {
	Dir string
	// MaxImageBytes caps what one image may extract to; 0: no cap. Layers
	// are compressed, so without it a small image could fill the node.
	MaxImageBytes int64
}

// Image is a containerDisk extracted on the node.
type Image struct {
	// Ref is the reference as given; Digest the manifest digest it resolved to.
	Ref, Digest string
	// Dir holds the extracted files under their image paths.
	Dir string
}

// Path is where an image file (e.g. "/boot/vmlinuz") was extracted.
func (im *Image) Path(file string) string {
	return filepath.Join(im.Dir, filepath.FromSlash(path.Clean("/"+file)))
}

// Disk finds the disk file under /disk/: the only one, or the first by name.
func (im *Image) Disk() (string, error) {
	entries, err := os.ReadDir(im.Path(DiskDir))
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("image %s has no file under %s: %w", im.Ref, DiskDir, ErrNotFound)
	}
	sort.Strings(names)
	return filepath.Join(im.Path(DiskDir), names[0]), nil
}

// Fetch resolves ref, and extracts the files under /disk/ and the extra
// paths into Dir/<digest> unless an earlier fetch did; either way the
// image counts as used now (see Collect). Registries on loopback or
// private addresses are spoken to over plain HTTP, as go-containerregistry
// does by default.
func (c Cache) Fetch(ctx context.Context, ref string, extra ...string) (*Image, error) {
	img, im, err := resolve(ctx, ref, c.Dir)
	if err != nil {
		return nil, err
	}
	complete := exists(filepath.Join(im.Dir, completeFile))
	if complete && allExist(im, extra) {
		return im, touch(im)
	}
	tmp, err := os.MkdirTemp(c.Dir, fetchPrefix)
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return nil, err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := extract(tar.NewReader(rc), tmp, wanted(extra), c.MaxImageBytes); err != nil {
		return nil, fmt.Errorf("extracting %s: %w", ref, err)
	}
	staged := &Image{Dir: tmp}
	for _, e := range extra {
		if !exists(staged.Path(e)) {
			return nil, fmt.Errorf("image %s has no file %s: %w", ref, e, ErrNotFound)
		}
	}
	if complete {
		// An earlier fetch for another VM took other kernel paths.
		if err := moveFiles(staged, im, extra); err != nil {
			return nil, err
		}
		return im, touch(im)
	}
	if err := os.WriteFile(filepath.Join(tmp, completeFile), []byte(im.Digest+"\n"), 0o644); err != nil {
		return nil, err
	}
	// Several fetches of one digest may race; the first rename wins and the
	// others find a complete directory.
	if err := os.Rename(tmp, im.Dir); err != nil && !exists(filepath.Join(im.Dir, completeFile)) {
		return nil, fmt.Errorf("storing %s: %w", ref, err)
	}
	return im, touch(im)
}

// completeFile marks a finished extraction; its time is the last use.
const completeFile = ".complete"

// fetchPrefix names extractions in progress.
const fetchPrefix = ".fetch-"

func touch(im *Image) error {
	now := time.Now()
	return os.Chtimes(filepath.Join(im.Dir, completeFile), now, now)
}

// moveFiles moves files from one extraction into another.
func moveFiles(from, to *Image, files []string) error {
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(to.Path(f)), 0o755); err != nil {
			return err
		}
		if err := os.Rename(from.Path(f), to.Path(f)); err != nil {
			return fmt.Errorf("storing %s of %s: %w", f, to.Ref, err)
		}
	}
	return nil
}

// wanted selects the files under /disk/ and the extra paths.
func wanted(extra []string) func(string) bool {
	return func(p string) bool {
		p = path.Clean("/" + p)
		if strings.HasPrefix(p, DiskDir) {
			return true
		}
		for _, e := range extra {
			if path.Clean("/"+e) == p {
				return true
			}
		}
		return false
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func allExist(im *Image, files []string) bool {
	for _, f := range files {
		if !exists(im.Path(f)) {
			return false
		}
	}
	return true
}

// resolve fetches ref's manifest and names its cache directory.
func resolve(ctx context.Context, ref, cache string) (v1.Image, *Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		if isNotFound(err) {
			return nil, nil, fmt.Errorf("pulling %s: %w: %w", ref, ErrNotFound, err)
		}
		return nil, nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	return img, &Image{Ref: ref, Digest: digest.String(), Dir: filepath.Join(cache, digest.Hex)}, nil
}

// extract writes the regular files want selects, limit bytes in all (0:
// no cap); files stay world-readable so that QEMU, which runs unprivileged,
// can open them.
func extract(tr *tar.Reader, dir string, want func(string) bool, limit int64) error {
	var written int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || !want(h.Name) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+h.Name)))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		var r io.Reader = tr
		if limit > 0 {
			r = io.LimitReader(tr, limit-written+1)
		}
		n, err := writeFile(dst, r)
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if written += n; limit > 0 && written > limit {
			return fmt.Errorf("%w: its disk files take more than %d bytes, the most one image may take on a node", ErrTooLarge, limit)
		}
	}
}

func writeFile(dst string, r io.Reader) (int64, error) {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err != nil {
		f.Close()
		return n, err
	}
	return n, f.Close()
}

func isNotFound(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	if terr.StatusCode == 404 {
		return true
	}
	for _, d := range terr.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

// Format reads a disk image's format from its first bytes: "qcow2" or "raw".
func Format(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("reading %s: %w", file, err)
	}
	if string(magic) == "QFI\xfb" {
		return "qcow2", nil
	}
	return "raw", nil
}

// ErrNotSelfContained marks a disk in an image that names another file
// (a qcow2 backing file or external data file): QEMU would open that file
// on the node, so it is refused before anything opens the image.
var ErrNotSelfContained = errors.New("containerDisk is not self-contained")

// Overlay creates a qcow2 file at dst whose backing file is base, so the
// VM writes to its own file and the cached image stays pristine; the
// overlay names it backingAs when the launcher sees it at another path
// (empty: base).
func Overlay(ctx context.Context, base, dst, backingAs string) error {
	if err := images.SelfContained(base); err != nil {
		return fmt.Errorf("%w: %w", ErrNotSelfContained, err)
	}
	format, err := Format(base)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", format, "-b", base, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create overlay on %s: %w: %s", base, err, strings.TrimSpace(string(out)))
	}
	if backingAs == "" || backingAs == base {
		return nil
	}
	// -u only rewrites the name: the data is the same file.
	out, err = exec.CommandContext(ctx, "qemu-img", "rebase", "-q", "-u", "-f", "qcow2", "-F", format, "-b", backingAs, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img rebase overlay %s onto %s: %w: %s", dst, backingAs, err, strings.TrimSpace(string(out)))
	}
	return nil
}
