package importdisk

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/contracts/upload"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// uploadServer receives one upload into p.Dir/disk.img. A failed upload
// leaves the old disk (if any) in place and the server waiting for the next
// try; the first upload that succeeds ends it.
type uploadServer struct {
	p    Params
	pub  ed25519.PublicKey
	prog *progress
	now  func() time.Time

	mu   sync.Mutex
	busy bool
	done chan *Result
}

// streamSource is an upload body as an images.Source.
type streamSource struct {
	r     io.Reader
	total int64
}

func (s streamSource) Open(context.Context) (io.ReadCloser, int64, error) {
	return io.NopCloser(s.r), s.total, nil
}

func (s streamSource) String() string { return "the upload" }

// Upload serves the upload paths (and GET /progress) on p.UploadAddr until
// an upload has been imported, and returns its result.
func Upload(ctx context.Context, p Params, out io.Writer) (*Result, error) {
	pub, err := upload.ParsePublicKey(p.UploadPublicKey)
	if err != nil {
		return nil, err
	}
	if p.UploadClaim == "" || p.UploadClaimUID == "" || p.Namespace == "" {
		return nil, errors.New("an upload needs the claim name, UID and namespace it is for")
	}
	s := &uploadServer{p: p, pub: pub, prog: newProgress(out), now: time.Now, done: make(chan *Result, 1)}
	l, err := net.Listen("tcp", p.UploadAddr)
	if err != nil {
		return nil, fmt.Errorf("serving uploads on %s: %w", p.UploadAddr, err)
	}
	srv := &http.Server{Handler: s.handler(ctx), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	fmt.Fprintf(out, "waiting for an upload into PVC %s/%s on %s\n", p.Namespace, p.UploadClaim, l.Addr())
	select {
	case res := <-s.done:
		// Let the answer to the client go out before the server closes.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *uploadServer) handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /progress", s.prog)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, path := range upload.Paths {
		async, form := path == upload.AsyncPath || path == upload.FormAsyncPath, path == upload.FormPath || path == upload.FormAsyncPath
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) { s.upload(ctx, w, r, async, form) })
	}
	return mux
}

// authorize checks the request's token is for this claim.
func (s *uploadServer) authorize(r *http.Request) error {
	token := upload.BearerToken(r.Header.Get("Authorization"))
	if token == "" {
		return fmt.Errorf("%w: no bearer token", upload.ErrBadToken)
	}
	c, err := upload.Verify(s.pub, token, s.now())
	if err != nil {
		return err
	}
	return c.For(s.p.Namespace, s.p.UploadClaim, s.p.UploadClaimUID)
}

func (s *uploadServer) upload(ctx context.Context, w http.ResponseWriter, r *http.Request, async, form bool) {
	if err := s.authorize(r); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	if s.busy {
		s.mu.Unlock()
		http.Error(w, "an upload into this PVC is in progress", http.StatusConflict)
		return
	}
	s.busy = true
	s.mu.Unlock()
	body, total, err := uploadBody(r, form)
	if err != nil {
		s.release()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	received := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		res, err := run(ctx, streamSource{r: &eofSignal{r: body, eof: received}, total: total}, s.p, s.prog)
		if err == nil {
			s.done <- res
		} else {
			fmt.Fprintf(s.prog.out, "upload failed: %v; waiting for another\n", err)
			s.release()
		}
		result <- err
	}()
	if async {
		select {
		case <-received:
			w.WriteHeader(http.StatusOK)
			return
		case err = <-result:
		}
	} else {
		err = <-result
	}
	if err != nil {
		http.Error(w, err.Error(), uploadStatus(err))
	}
}

func (s *uploadServer) release() {
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

// uploadStatus is the HTTP status for a failed import: 400 for bad data a
// retry with the same bytes cannot fix, else 500.
func uploadStatus(err error) int {
	var f *result.Failure
	if errors.As(err, &f) && f.ExitCode() == datastep.PermanentExitCode {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// uploadBody is the request's image data and its length (-1 if unknown).
func uploadBody(r *http.Request, form bool) (io.Reader, int64, error) {
	if !form {
		return r.Body, r.ContentLength, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the form: %w", err)
	}
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, 0, fmt.Errorf("the form has no file field: %w", err)
		}
		if part.FormName() == "file" {
			return part, -1, nil
		}
		_, _ = io.Copy(io.Discard, part)
	}
}

// eofSignal closes eof once r has been read to its end.
type eofSignal struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofSignal) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	if errors.Is(err, io.EOF) {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}
