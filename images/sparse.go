package images

import (
	"bytes"
	"errors"
	"io"
	"os"
)

// blockSize is the unit in which zeros become holes (and the copy buffer).
const blockSize = 64 << 10

var zeroBlock = make([]byte, blockSize)

// writeSparse copies r into f from offset 0, seeking over all-zero blocks so
// they stay holes, and sets the file's length to what was copied. f must be
// new and empty. It returns the number of bytes copied.
func writeSparse(f *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, blockSize)
	var off int64
	for {
		n, err := fill(r, buf)
		if n > 0 {
			if !bytes.Equal(buf[:n], zeroBlock[:n]) {
				if _, werr := f.WriteAt(buf[:n], off); werr != nil {
					return off, werr
				}
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return off, f.Truncate(off)
		}
		if err != nil {
			return off, err
		}
	}
}

// fill reads into buf until it is full or r fails. Unlike io.ReadFull it
// passes io.EOF through unchanged and never makes one up, so that a reader's
// own io.ErrUnexpectedEOF (a truncated gzip stream) stays an error.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
