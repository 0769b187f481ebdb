package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

// manifestPath matches /v2/<repo>/manifests/<reference>.
var manifestPath = regexp.MustCompile(`^/v2/(.+)/manifests/([^/]+)$`)

// entry is one journaled manifest push.
type entry struct {
	Repo        string `json:"repo"`
	Reference   string `json:"reference"`
	ContentType string `json:"contentType"`
	Body        []byte `json:"body"`
}

// Handler is an OCI distribution handler whose content persists under dir.
type Handler struct {
	inner      http.Handler
	journalDir string
	// user and password guard the private repositories (PrivatePrefix).
	user, password string
}

// New returns a registry handler storing blobs under dir/blobs and
// manifests under dir/manifests, after replaying manifests pushed earlier.
func New(dir string) (*Handler, error) {
	blobDir := filepath.Join(dir, "blobs")
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating registry blob dir: %w", err)
	}
	h := &Handler{
		inner: ggcr.New(
			ggcr.WithBlobHandler(ggcr.NewDiskBlobHandler(blobDir)),
			ggcr.Logger(log.New(io.Discard, "", 0)),
		),
		journalDir: filepath.Join(dir, "manifests"),
	}
	var err error
	if h.user, h.password, err = Credentials(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.journalDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating registry manifest dir: %w", err)
	}
	if err := h.replay(); err != nil {
		return nil, err
	}
	return h, nil
}

// ServeHTTP serves the distribution API and journals successful manifest pushes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(w, r) {
		return
	}
	m := manifestPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodPut || m == nil {
		h.inner.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading manifest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &statusRecorder{ResponseWriter: w}
	h.inner.ServeHTTP(rec, r)
	if rec.status/100 != 2 {
		return
	}
	e := entry{Repo: m[1], Reference: m[2], ContentType: r.Header.Get("Content-Type"), Body: body}
	if err := h.record(e); err != nil {
		// The push succeeded in memory; losing it on restart is the only harm.
		log.Printf("registry: journaling manifest %s:%s: %v", e.Repo, e.Reference, err)
	}
}

func (h *Handler) record(e entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(e.Repo + "\x00" + e.Reference))
	name := filepath.Join(h.journalDir, hex.EncodeToString(sum[:8])+".json")
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// replay pushes journaled manifests into the in-memory manifest store, digests
// (children of indexes) before tags so that every reference resolves.
func (h *Handler) replay() error {
	files, err := filepath.Glob(filepath.Join(h.journalDir, "*.json"))
	if err != nil {
		return err
	}
	var entries []entry
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading registry journal %s: %w", f, err)
		}
		var e entry
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("decoding registry journal %s: %w", f, err)
		}
		entries = append(entries, e)
	}
	sort.SliceStable(entries, func(i, j int) bool {
		return strings.HasPrefix(entries[i].Reference, "sha256:") && !strings.HasPrefix(entries[j].Reference, "sha256:")
	})
	for _, e := range entries {
		req := httptest.NewRequest(http.MethodPut, "/v2/"+e.Repo+"/manifests/"+e.Reference, bytes.NewReader(e.Body))
		req.Header.Set("Content-Type", e.ContentType)
		rec := httptest.NewRecorder()
		h.inner.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			return fmt.Errorf("replaying manifest %s:%s: %d %s", e.Repo, e.Reference, rec.Code, rec.Body.String())
		}
	}
	return nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
