package downloads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
)

// SumsFile is the path of the SHA-256 sums, in sha256sum's format.
const SumsFile = "SHA256SUMS"

// Server serves the files under a directory, which it reads once.
type Server struct {
	root  *os.Root
	files []string
	sums  string
}

// New reads the tree at dir: its regular files are what the Server serves.
func New(dir string) (*Server, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the downloads %s: %w", dir, err)
	}
	s := &Server{root: root}
	var sums strings.Builder
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		sum, err := s.sum(p)
		if err != nil {
			return err
		}
		s.files = append(s.files, p)
		fmt.Fprintf(&sums, "%s  %s\n", sum, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the downloads %s: %w", dir, err)
	}
	if len(s.files) == 0 {
		return nil, fmt.Errorf("no files to serve in %s", dir)
	}
	sort.Strings(s.files)
	s.sums = sums.String()
	return s, nil
}

func (s *Server) sum(p string) (string, error) {
	f, err := s.root.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ServeHTTP answers GET and HEAD: / lists the files, /SHA256SUMS their
// sums, /healthz that the server runs, and each file's path the file.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	switch p {
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "tekvirt clients (GET /<file>; sums in /%s):\n", SumsFile)
		for _, f := range s.files {
			fmt.Fprintln(w, "/"+f)
		}
		return
	case SumsFile:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, s.sums)
		return
	case "healthz":
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	i := sort.SearchStrings(s.files, p)
	if i == len(s.files) || s.files[i] != p {
		http.NotFound(w, r)
		return
	}
	f, err := s.root.Open(p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", path.Base(p)))
	http.ServeContent(w, r, path.Base(p), st.ModTime(), f)
}
