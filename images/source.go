package images

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Source is where an image comes from.
type Source interface {
	// Open returns the image stream and its size (-1 when unknown).
	Open(ctx context.Context) (io.ReadCloser, int64, error)
	// String names the source in messages.
	String() string
}

// FileSource reads a local file (or a PVC's disk.img, for clones).
type FileSource struct{ Path string }

// Open implements Source.
func (s FileSource) Open(context.Context) (io.ReadCloser, int64, error) {
	f, err := os.Open(s.Path)
	if os.IsNotExist(err) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, s.Path)
	}
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func (s FileSource) String() string { return s.Path }
