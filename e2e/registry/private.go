package registry

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// PrivatePrefix starts the repositories that answer only with the
// credentials in CredentialsFile (basic auth), so tests can tell a pull
// made with credentials from one made without. Blobs are shared by digest
// across repositories; only manifests and blobs asked for under this
// prefix are guarded.
const PrivatePrefix = "private/"

// CredentialsFile is the file, in the registry's directory, that holds "user:password" for
// the private repositories; the registry writes it on its first start.
const CredentialsFile = "private-credentials"

// Credentials reads the private repositories' user and password from the
// registry directory dir, making them if none exist yet.
func Credentials(dir string) (user, password string, err error) {
	path := filepath.Join(dir, CredentialsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		secret := make([]byte, 16)
		if _, err := rand.Read(secret); err != nil {
			return "", "", err
		}
		data = []byte("tenant:" + hex.EncodeToString(secret))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", "", fmt.Errorf("writing the private registry credentials: %w", err)
		}
	} else if err != nil {
		return "", "", err
	}
	user, password, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("%s is not user:password", path)
	}
	return user, password, nil
}

// authorized says whether r may have what it asks for: anything outside
// the private repositories, or with their credentials.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, "/v2/"+PrivatePrefix) {
		return true
	}
	user, password, ok := r.BasicAuth()
	if ok && subtle.ConstantTimeCompare([]byte(user), []byte(h.user)) == 1 &&
		subtle.ConstantTimeCompare([]byte(password), []byte(h.password)) == 1 {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="tekvirt-private"`)
	http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
	return false
}
