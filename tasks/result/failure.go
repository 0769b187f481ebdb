package result

import (
	"errors"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/images"
)

// Failure is a data step's error with the exit code it deserves.
type Failure struct{ Err error }

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// ExitCode is datastep.PermanentExitCode for errors a retry cannot fix, else 1.
func (f *Failure) ExitCode() int {
	for _, e := range []error{images.ErrChecksum, images.ErrInvalidImage, images.ErrTooLarge, images.ErrBackingFile, images.ErrNotFound, images.ErrToolMissing} {
		if errors.Is(f.Err, e) {
			return datastep.PermanentExitCode
		}
	}
	return 1
}
