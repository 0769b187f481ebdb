package registry

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestPullOnly(t *testing.T) {
	served := 0
	h := PullOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served++ }), netip.MustParseAddr("192.0.2.1"))
	for _, tc := range []struct {
		method, from string
		want         int
	}{
		{http.MethodGet, "10.244.1.7:40000", http.StatusOK},
		{http.MethodHead, "10.244.1.7:40000", http.StatusOK},
		{http.MethodPut, "10.244.1.7:40000", http.StatusForbidden},
		{http.MethodPost, "10.244.1.7:40000", http.StatusForbidden},
		{http.MethodPatch, "10.244.1.7:40000", http.StatusForbidden},
		{http.MethodDelete, "10.244.1.7:40000", http.StatusForbidden},
		{http.MethodPost, "[::ffff:10.244.1.7]:40000", http.StatusForbidden},
		{http.MethodPost, "192.0.2.1:40000", http.StatusOK},
		{http.MethodPut, "[::ffff:192.0.2.1]:40000", http.StatusOK},
		{http.MethodPut, "garbage", http.StatusForbidden},
	} {
		before := served
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, "/v2/tekvirt/x/blobs/uploads/", nil)
		req.RemoteAddr = tc.from
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s from %s: %d, want %d", tc.method, tc.from, rec.Code, tc.want)
		}
		if (tc.want == http.StatusOK) != (served > before) {
			t.Errorf("%s from %s: passed on %v", tc.method, tc.from, served > before)
		}
		if tc.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), `"DENIED"`) {
			t.Errorf("%s from %s: body %s", tc.method, tc.from, rec.Body)
		}
	}
}
