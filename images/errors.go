package images

import "errors"

// Errors an import can end with; each is wrapped with the details.
var (
	// ErrChecksum: the image's digest differs from the expected one.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrTooLarge: the image's virtual size exceeds the target.
	ErrTooLarge = errors.New("image larger than the target")
	// ErrBackingFile: a qcow2 image depends on another file (a backing
	// file or an external data file).
	ErrBackingFile = errors.New("qcow2 image refers to another file")
	// ErrInvalidImage: the image is corrupt or truncated.
	ErrInvalidImage = errors.New("invalid image")
	// ErrToolMissing: the format needs qemu-img, which is not installed.
	ErrToolMissing = errors.New("conversion tool missing")
	// ErrNotFound: the source does not exist (HTTP 404, no such image).
	ErrNotFound = errors.New("source not found")
	// ErrUnauthorized: the source refuses the credentials given (or their
	// absence).
	ErrUnauthorized = errors.New("source refuses the credentials")
)
