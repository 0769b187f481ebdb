package frontproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The headers the kube-apiserver names the caller in (its
// --requestheader-*-headers, X-Remote-* as everywhere).
const (
	userHeader        = "X-Remote-User"
	groupHeader       = "X-Remote-Group"
	extraHeaderPrefix = "X-Remote-Extra-"
)

type userKey struct{}

// User is the caller of a request Authenticated let through.
func User(ctx context.Context) (authnv1.UserInfo, bool) {
	u, ok := ctx.Value(userKey{}).(authnv1.UserInfo)
	return u, ok
}

// Authenticated lets through only requests the kube-apiserver proxied: a
// client certificate verified against the front proxy's CA, with one of
// allowed names (empty: any it signed), naming a user; the handler finds
// the user with User.
func Authenticated(allowed []string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			WriteStatus(w, apierrors.NewUnauthorized("a client certificate of the front proxy is required"))
			return
		}
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if len(allowed) > 0 && !slices.Contains(allowed, cn) {
			WriteStatus(w, apierrors.NewUnauthorized(fmt.Sprintf("client certificate %q is not an allowed front proxy", cn)))
			return
		}
		u := authnv1.UserInfo{Username: r.Header.Get(userHeader), Groups: r.Header.Values(groupHeader), Extra: map[string]authnv1.ExtraValue{}}
		for k, v := range r.Header {
			if name, ok := strings.CutPrefix(k, extraHeaderPrefix); ok {
				if key, err := url.PathUnescape(name); err == nil {
					u.Extra[strings.ToLower(key)] = v
				}
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	}
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteStatus answers with err's Status (an internal error unless it is an
// API status error), as the Kubernetes API does.
func WriteStatus(w http.ResponseWriter, err error) {
	st := apierrors.NewInternalError(err).ErrStatus
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st = se.Status()
	}
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	WriteJSON(w, int(st.Code), &st)
}

// Error is an API status error with code, reason and message.
func Error(code int, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Code: int32(code), Reason: reason, Message: msg}}
}
