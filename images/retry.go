package images

import (
	"context"
	"fmt"
	"time"
)

// retry calls try up to attempts times, waiting backoff, then twice as long
// each time, between calls, until it succeeds or says (false) that its
// failure is not worth another try; that failure, or a cancelled ctx, is
// returned as is, and a failure every attempt met as an *exhaustedError.
func retry(ctx context.Context, attempts int, backoff time.Duration, try func() (bool, error)) error {
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff << (attempt - 2)):
			}
		}
		again, err := try()
		if err == nil || !again {
			return err
		}
		last = err
	}
	return &exhaustedError{attempts: attempts, err: last}
}

// exhaustedError is the last failure of a retry that used every attempt.
type exhaustedError struct {
	attempts int
	err      error
}

func (e *exhaustedError) Error() string {
	return fmt.Sprintf("giving up after %d attempts: %v", e.attempts, e.err)
}
func (e *exhaustedError) Unwrap() error { return e.err }
