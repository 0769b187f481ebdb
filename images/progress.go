package images

import (
	"errors"
	"io"
	"sync"
	"time"
)

// Progress is how far an import is.
type Progress struct {
	// Bytes read from the source so far, and its size (-1 when unknown).
	Done, Total int64
	// Phase is "downloading", "converting" or "done".
	Phase string
}

// Percent is Done of Total, or -1 when the total is unknown.
func (p Progress) Percent() float64 {
	if p.Total <= 0 {
		return -1
	}
	return 100 * float64(p.Done) / float64(p.Total)
}

// SourceError is a failure of the source itself (network, file), as
// opposed to the image it carries.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return "reading the source: " + e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

func isSourceError(err error) bool {
	var se *SourceError
	return errors.As(err, &se)
}

// progressReader counts bytes and reports at most every interval.
type progressReader struct {
	r        io.Reader
	total    int64
	report   func(Progress)
	interval time.Duration

	mu   sync.Mutex
	done int64
	last time.Time
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF {
		err = &SourceError{Err: err}
	}
	p.mu.Lock()
	p.done += int64(n)
	due := time.Since(p.last) >= p.interval
	if due {
		p.last = time.Now()
	}
	done := p.done
	p.mu.Unlock()
	if due && p.report != nil {
		p.report(Progress{Done: done, Total: p.total, Phase: "downloading"})
	}
	return n, err
}

func (p *progressReader) count() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}
