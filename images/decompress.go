package images

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// peeked is a stream whose head can be inspected without consuming it.
type peeked struct {
	*bufio.Reader
}

func newPeeked(r io.Reader) peeked { return peeked{bufio.NewReaderSize(r, HeaderSize+4096)} }

// format detects the format at the head of the stream.
func (p peeked) format() (Format, error) {
	h, err := p.Peek(HeaderSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", err
	}
	return Detect(h), nil
}

// Decompress unwraps gz, xz and zst layers (nested ones too) and returns the
// inner stream, its format and the wrappers it removed, outermost first.
func Decompress(r io.Reader) (io.Reader, Format, []Format, error) {
	var layers []Format
	for range 4 {
		p := newPeeked(r)
		f, err := p.format()
		if err != nil && len(layers) > 0 {
			return nil, "", nil, fmt.Errorf("%s stream truncated or corrupt: %w", layers[len(layers)-1], err)
		}
		if err != nil {
			return nil, "", nil, fmt.Errorf("reading the image header: %w", err)
		}
		if !f.Compressed() {
			return p, f, layers, nil
		}
		layers = append(layers, f)
		switch f {
		case Gzip:
			zr, err := gzip.NewReader(p)
			if err != nil {
				return nil, "", nil, fmt.Errorf("gzip: %w", err)
			}
			r = zr
		case XZ:
			if splittable(p.Reader) {
				r = newXZBlocksReader(p.Reader, runtime.NumCPU())
				continue
			}
			xr, err := xz.NewReader(p)
			if err != nil {
				return nil, "", nil, fmt.Errorf("xz: %w", err)
			}
			r = xr
		case Zstd:
			zr, err := zstd.NewReader(p, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
			if err != nil {
				return nil, "", nil, fmt.Errorf("zstd: %w", err)
			}
			r = zr.IOReadCloser()
		}
	}
	return nil, "", nil, fmt.Errorf("more than 3 nested compression layers (%v)", layers)
}
