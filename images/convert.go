package images

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/lima-vm/go-qcow2reader/convert"
	"github.com/lima-vm/go-qcow2reader/image"
	"github.com/lima-vm/go-qcow2reader/image/qcow2"
)

func init() {
	// qcow2 clusters may be zstd-compressed; go-qcow2reader brings only zlib.
	qcow2.SetDecompressor(qcow2.CompressionTypeZstd, func(r io.Reader) (io.ReadCloser, error) {
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	})
}

// qcow2Info opens a staged qcow2 file and checks it can be converted. A
// backing file or an external data file is refused from the header alone,
// before any library could open the path the image names.
func qcow2Info(f *os.File) (*qcow2.Qcow2, error) {
	if err := refuseExternalFiles(f); err != nil {
		return nil, err
	}
	img, err := qcow2.Open(f, func(io.ReaderAt, image.Type) (image.Image, error) {
		return nil, ErrBackingFile
	})
	if err != nil {
		return nil, fmt.Errorf("%w: qcow2 header: %w", ErrInvalidImage, err)
	}
	if err := img.Readable(); err != nil {
		_ = img.Close()
		return nil, fmt.Errorf("%w: %w", ErrInvalidImage, err)
	}
	return img, nil
}

// SelfContained returns an error wrapping ErrBackingFile when the image at
// path is a qcow2 that names another file: a backing file or an external
// data file. QEMU would open that file for whoever runs the image, so an
// image from a user must never get that far. Other formats pass.
func SelfContained(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != qcow2Magic {
		return nil
	}
	return refuseExternalFiles(f)
}

const qcow2Magic = "QFI\xfb"

// refuseExternalFiles reads the big-endian qcow2 header: version (bytes
// 4-7), backing_file_offset and _size (bytes 8-19) and, from version 3 on,
// incompatible_features (bytes 72-79), whose bit 2 marks an external data
// file named in a header extension.
func refuseExternalFiles(f *os.File) error {
	h := make([]byte, 80)
	n, err := f.ReadAt(h, 0)
	if n < 20 {
		return fmt.Errorf("%w: qcow2 header: %w", ErrInvalidImage, err)
	}
	switch version := binary.BigEndian.Uint32(h[4:]); version {
	case 2:
	case 3:
		if n < 80 {
			return fmt.Errorf("%w: qcow2 v3 header cut short at %d bytes", ErrInvalidImage, n)
		}
		if binary.BigEndian.Uint64(h[72:])&(1<<2) != 0 {
			return fmt.Errorf("%w: an external data file: import a self-contained image (qemu-img convert it first)", ErrBackingFile)
		}
	default:
		return fmt.Errorf("%w: qcow2 header: version %d (only 2 and 3 exist)", ErrInvalidImage, version)
	}
	off, size := binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint32(h[16:])
	if off == 0 {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if size == 0 || size > 1023 || off > uint64(st.Size()) {
		return fmt.Errorf("%w: qcow2 header: backing file name at %d (%d bytes) is outside the %d-byte image", ErrInvalidImage, off, size, st.Size())
	}
	name := make([]byte, min(size, 1023))
	if _, err := f.ReadAt(name, int64(off)); err != nil {
		name = []byte("(unreadable name)")
	}
	return fmt.Errorf("%w: backing file %q: import a self-contained image (qemu-img convert it first)", ErrBackingFile, name)
}

// convertQCOW2 writes the raw content of img into dst (new and empty),
// leaving zero ranges as holes.
func convertQCOW2(img image.Image, dst *os.File, progress func(int64)) error {
	var up convert.Updater
	if progress != nil {
		up = updater(progress)
	}
	if err := convert.Convert(dst, img, convert.Options{Progress: up}); err != nil {
		return fmt.Errorf("%w: converting qcow2: %w", ErrInvalidImage, err)
	}
	return dst.Truncate(img.Size())
}

type updater func(int64)

func (u updater) Update(n int64) { u(n) }

// qemuImgVirtualSize asks qemu-img for an image's virtual size.
func qemuImgVirtualSize(ctx context.Context, tool, path string, f Format) (int64, error) {
	out, err := exec.CommandContext(ctx, tool, "info", "-f", string(f), "--output=json", path).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w: qemu-img info (%s): %s", ErrInvalidImage, f, strings.TrimSpace(string(out)))
	}
	i := strings.Index(string(out), `"virtual-size":`)
	if i < 0 {
		return 0, fmt.Errorf("qemu-img info: no virtual-size in %s", out)
	}
	rest := strings.TrimSpace(string(out)[i+len(`"virtual-size":`):])
	end := strings.IndexAny(rest, ",}\n")
	if end < 0 {
		return 0, fmt.Errorf("qemu-img info: bad virtual-size in %s", out)
	}
	return strconv.ParseInt(strings.TrimSpace(rest[:end]), 10, 64)
}

// qemuImgConvert converts src (of format f) to a raw dst with qemu-img.
func qemuImgConvert(ctx context.Context, tool, src, dst string, f Format) error {
	out, err := exec.CommandContext(ctx, tool, "convert", "-f", string(f), "-O", "raw", "-S", "4k", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: qemu-img convert (%s): %s", ErrInvalidImage, f, strings.TrimSpace(string(out)))
	}
	return nil
}

// findQemuImg returns the qemu-img to use, or ErrToolMissing naming f.
func findQemuImg(configured string, f Format) (string, error) {
	if configured != "" {
		return configured, nil
	}
	p, err := exec.LookPath("qemu-img")
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%w: %s images need qemu-img (apt-get install qemu-utils)", ErrToolMissing, f)
	}
	return p, err
}
