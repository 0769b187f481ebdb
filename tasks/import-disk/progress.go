package importdisk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/images"
)

// progress logs every logEvery and keeps the latest report for the endpoint.
type progress struct {
	out      io.Writer
	logEvery time.Duration

	mu      sync.Mutex
	report  datastep.ProgressReport
	lastLog time.Time
}

func newProgress(out io.Writer) *progress {
	return &progress{out: out, logEvery: 2 * time.Second, report: datastep.ProgressReport{Progress: "N/A", Total: -1}}
}

func (p *progress) update(pr images.Progress) {
	r := datastep.ProgressReport{Progress: "N/A", Done: pr.Done, Total: pr.Total}
	if pr.Percent() >= 0 {
		r.Progress = fmt.Sprintf("%.2f%%", pr.Percent())
	}
	p.mu.Lock()
	p.report = r
	due := time.Since(p.lastLog) >= p.logEvery || pr.Phase == "done"
	if due {
		p.lastLog = time.Now()
	}
	p.mu.Unlock()
	if !due {
		return
	}
	if pr.Percent() >= 0 {
		fmt.Fprintf(p.out, "progress: %.2f%% (%d of %d bytes)\n", pr.Percent(), pr.Done, pr.Total)
	} else {
		fmt.Fprintf(p.out, "progress: %d bytes\n", pr.Done)
	}
}

func (p *progress) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	r := p.report
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(r)
}

// serve answers GET /progress on addr until the returned stop is called.
func (p *progress) serve(addr string) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving progress on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /progress", p)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(p.out, "progress endpoint:", err)
		}
	}()
	return func() { _ = srv.Close() }, nil
}
