package images

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Clone methods.
const (
	// CloneReflink shares the source's blocks (XFS reflink, btrfs): instant.
	CloneReflink = "reflink"
	// CloneSparse copies the allocated ranges, leaving holes as holes.
	CloneSparse = "sparse copy"
)

// Clone copies the disk at src to dst, sharing blocks when the filesystem
// can and copying only the allocated ranges when not. dst appears only once
// complete (written beside it, then renamed).
func Clone(src, dst string) (string, error) {
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, src)
	}
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp := dst + ".cloning"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp) }()
	method, err := CloneFile(in, out)
	if err != nil {
		out.Close()
		return "", fmt.Errorf("copying %s: %w", src, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return method, os.Rename(tmp, dst)
}

// CloneFile copies in to the empty file out, sharing blocks when the
// filesystem can (CloneReflink) and copying the allocated ranges when not
// (CloneSparse); it returns the method used.
func CloneFile(in, out *os.File) (string, error) {
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) == nil {
		return CloneReflink, nil
	}
	return CloneSparse, sparseCopy(in, out)
}

// copyRange copies n bytes at off in the kernel (copy_file_range), or
// through a buffer where the kernel cannot.
func copyRange(in, out *os.File, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		c, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(n, 1<<30)), 0)
		if err != nil || c == 0 {
			_, cerr := io.Copy(io.NewOffsetWriter(out, woff), io.NewSectionReader(in, roff, n))
			return cerr
		}
		n -= int64(c)
	}
	return nil
}

// sparseCopy copies the data ranges SEEK_DATA/SEEK_HOLE report and sets
// the length, so holes stay holes.
func sparseCopy(in, out *os.File) error {
	st, err := in.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	fd := int(in.Fd())
	var off int64
	for off < size {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if err := copyRange(in, out, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}
