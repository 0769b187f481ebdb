package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Target is where an import writes.
type Target struct {
	// Path of the raw disk (disk.img). The import writes Path.importing
	// (and, for formats that need random access, Path.scratch) beside it
	// and renames on success, so a failure leaves an existing disk intact.
	Path string
	// Size, when set, is the virtual size wanted: a smaller image is grown
	// to it, a larger one fails.
	Size int64
	// Capacity, when set, is the most the target holds (the volume's size).
	Capacity int64
}

// Options tune an import.
type Options struct {
	// Checksum, "alg:hex", is verified over the source bytes as given.
	Checksum string
	// Progress is called about every ProgressInterval and at the end.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// QemuImg is the qemu-img for vmdk, vhd, vhdx and vdi (looked up on PATH when empty).
	QemuImg string
}

// Result describes an import that succeeded.
type Result struct {
	// Format of the disk image and the compressions around it, outermost first.
	Format      Format
	Compression []Format
	// VirtualSize of the image; the disk is max(VirtualSize, Target.Size).
	VirtualSize, DiskSize int64
	// SourceBytes read from the source.
	SourceBytes int64
}

// Import streams src (of total bytes, -1 if unknown) into t as a sparse raw disk.
func Import(ctx context.Context, src io.Reader, total int64, t Target, o Options) (*Result, error) {
	sum, err := ParseChecksum(o.Checksum)
	if err != nil {
		return nil, err
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = time.Second
	}
	pr := &progressReader{r: src, total: total, report: o.Progress, interval: o.ProgressInterval}
	var in io.Reader = pr
	if sum != nil {
		in = io.TeeReader(pr, sum)
	}
	imp := &importer{ctx: ctx, t: t, o: o, tmp: t.Path + ".importing", scratch: t.Path + ".scratch"}
	if f, ok := src.(*os.File); ok {
		imp.local = f
	}
	defer imp.cleanup()
	res, err := imp.run(in)
	if err != nil {
		return nil, err
	}
	// The checksum covers the whole source, trailing bytes included.
	if sum != nil {
		if _, err := io.Copy(io.Discard, in); err != nil {
			return nil, fmt.Errorf("reading the rest of the source: %w", err)
		}
		if err := sum.Verify(); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(imp.tmp, t.Path); err != nil {
		return nil, fmt.Errorf("putting the disk in place: %w", err)
	}
	res.SourceBytes = pr.count()
	if imp.local != nil && total > 0 {
		res.SourceBytes = total // read through its own handle
	}
	if o.Progress != nil {
		o.Progress(Progress{Done: res.SourceBytes, Total: total, Phase: "done"})
	}
	return res, nil
}

type importer struct {
	// local is the source when it is a local file (no staging needed).
	local        *os.File
	ctx          context.Context
	t            Target
	o            Options
	tmp, scratch string
}

func (imp *importer) cleanup() {
	_ = os.Remove(imp.tmp)
	_ = os.Remove(imp.scratch)
}

// run decompresses, converts into imp.tmp and sizes it.
func (imp *importer) run(in io.Reader) (*Result, error) {
	inner, format, layers, err := Decompress(in)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidImage, err)
	}
	if format == Tar {
		var more []Format
		if inner, format, more, err = untar(inner); err != nil {
			return nil, err
		}
		layers = append(append(layers, Tar), more...)
	}
	res := &Result{Format: format, Compression: layers}
	var virtual int64
	switch format {
	case Raw, ISO:
		virtual, err = imp.writeRaw(inner, layers)
	case QCOW2:
		virtual, err = imp.writeQCOW2(inner, layers)
	default:
		virtual, err = imp.writeWithQemuImg(inner, layers, format)
	}
	if err != nil {
		return nil, err
	}
	res.VirtualSize, res.DiskSize = virtual, max(virtual, imp.t.Size)
	if err := imp.resize(virtual); err != nil {
		return nil, err
	}
	return res, nil
}

func (imp *importer) checkSize(virtual int64) error {
	if imp.t.Size > 0 && virtual > imp.t.Size {
		return fmt.Errorf("%w: virtual size %d bytes exceeds the requested size %d", ErrTooLarge, virtual, imp.t.Size)
	}
	if c := imp.t.Capacity; c > 0 && max(virtual, imp.t.Size) > c {
		return fmt.Errorf("%w: virtual size %d bytes exceeds the volume's %d", ErrTooLarge, max(virtual, imp.t.Size), c)
	}
	return nil
}

func (imp *importer) resize(virtual int64) error {
	if imp.t.Size <= virtual {
		return nil
	}
	return os.Truncate(imp.tmp, imp.t.Size)
}

// stream copies r sparsely into a new file, stopping past limit (0: none);
// sync makes it durable (the disk, not a scratch file).
func stream(path string, r io.Reader, limit int64, layers []Format, sync bool) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	if limit > 0 {
		r = io.LimitReader(r, limit+1)
	}
	n, err := writeSparse(f, r)
	if err != nil {
		f.Close()
		return n, streamError(err, layers)
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return n, err
		}
	}
	return n, f.Close()
}

// streamError names a decompression failure (a truncated or corrupt
// archive) as an invalid image; other errors pass through.
func streamError(err error, layers []Format) error {
	if len(layers) > 0 && (errors.Is(err, io.ErrUnexpectedEOF) || !isSourceError(err)) {
		return fmt.Errorf("%w: %s stream truncated or corrupt: %w", ErrInvalidImage, layers[len(layers)-1], err)
	}
	return err
}

func (imp *importer) writeRaw(r io.Reader, layers []Format) (int64, error) {
	limit := imp.t.Capacity
	if imp.t.Size > 0 {
		limit = imp.t.Size
	}
	n, err := stream(imp.tmp, r, limit, layers, true)
	if err != nil {
		return n, err
	}
	return n, imp.checkSize(n)
}

func (imp *importer) writeQCOW2(r io.Reader, layers []Format) (int64, error) {
	f, err := imp.randomAccess(r, layers)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	img, err := qcow2Info(f)
	if err != nil {
		return 0, err
	}
	defer func() { _ = img.Close() }()
	if err := imp.checkSize(img.Size()); err != nil {
		return 0, err
	}
	dst, err := os.OpenFile(imp.tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	if err := convertQCOW2(img, dst, nil); err != nil {
		dst.Close()
		return 0, err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return 0, err
	}
	return img.Size(), dst.Close()
}

func (imp *importer) writeWithQemuImg(r io.Reader, layers []Format, f Format) (int64, error) {
	tool, err := findQemuImg(imp.o.QemuImg, f)
	if err != nil {
		return 0, err
	}
	if err := imp.stage(r, layers); err != nil {
		return 0, err
	}
	virtual, err := qemuImgVirtualSize(imp.ctx, tool, imp.scratch, f)
	if err != nil {
		return 0, err
	}
	if err := imp.checkSize(virtual); err != nil {
		return 0, err
	}
	return virtual, qemuImgConvert(imp.ctx, tool, imp.scratch, imp.tmp, f)
}

// randomAccess returns the image as a file it can seek in: the source file
// itself when it is an uncompressed local file, else a scratch copy.
func (imp *importer) randomAccess(r io.Reader, layers []Format) (*os.File, error) {
	if imp.local != nil && len(layers) == 0 {
		return os.Open(imp.local.Name())
	}
	if err := imp.stage(r, layers); err != nil {
		return nil, err
	}
	return os.Open(imp.scratch)
}

// stage writes the image file to imp.scratch, for formats read at random.
// It is bounded by what could still fit the target: its size or capacity
// plus room for the format's metadata (qcow2 tables take well under 1/8 of
// the virtual size). Without that bound a small compressed file could
// expand into a scratch file that fills the volume's pool.
func (imp *importer) stage(r io.Reader, layers []Format) error {
	limit := max(imp.t.Size, imp.t.Capacity)
	if limit > 0 {
		limit += limit/8 + 1<<20
	}
	n, err := stream(imp.scratch, r, limit, layers, false)
	if err != nil {
		return err
	}
	if limit > 0 && n > limit {
		return fmt.Errorf("%w: the image file is larger than %d bytes, more than a disk of %d bytes and its metadata can take; stopped staging it", ErrTooLarge, limit, max(imp.t.Size, imp.t.Capacity))
	}
	return nil
}

// untar returns the first regular file of a tar stream, decompressed.
func untar(r io.Reader) (io.Reader, Format, []Format, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, "", nil, fmt.Errorf("%w: tar archive holds no file", ErrInvalidImage)
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("%w: tar: %w", ErrInvalidImage, err)
		}
		if h.Typeflag == tar.TypeReg {
			inner, f, layers, err := Decompress(tr)
			if err != nil {
				return nil, "", nil, fmt.Errorf("%w: %s in tar: %w", ErrInvalidImage, h.Name, err)
			}
			return inner, f, layers, nil
		}
	}
}
