package uploadproxy

import (
	"crypto/ed25519"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/upload"
)

// recorder stands for the upload step's pod.
type recorder struct{ got *http.Request }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	_, _ = io.Copy(io.Discard, req.Body)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func TestProxy(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cdiv1.AddToScheme, pipelinev1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	uploadSrc := &cdiv1.DataVolumeSource{Upload: &cdiv1.DataVolumeSourceUpload{}}
	ready := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ready"}, Spec: cdiv1.DataVolumeSpec{Source: uploadSrc},
		Status: cdiv1.DataVolumeStatus{Phase: cdiv1.UploadReady}}
	scheduled := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "scheduled"}, Spec: cdiv1.DataVolumeSpec{Source: uploadSrc},
		Status: cdiv1.DataVolumeStatus{Phase: cdiv1.UploadScheduled}}
	httpDV := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "http"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: "http://x"}}}}
	run := &pipelinev1.TaskRun{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ready-import-0"}, Status: pipelinev1.TaskRunStatus{
		TaskRunStatusFields: pipelinev1.TaskRunStatusFields{PodName: "ready-import-0-pod"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ready-import-0-pod"}, Status: corev1.PodStatus{PodIP: "10.0.0.5"}}
	var claims []client.Object
	for _, name := range []string{"ready", "scheduled", "http"} {
		claims = append(claims, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}})
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ready, scheduled, httpDV, run, pod).WithObjects(claims...).Build()

	pub, key, _ := ed25519.GenerateKey(nil)
	_, otherKey, _ := ed25519.GenerateKey(nil)
	rec := &recorder{}
	srv := httptest.NewServer((&Proxy{Client: c, PublicKey: pub, Log: logr.Discard(), Transport: rec}).Handler())
	defer srv.Close()
	token := func(k ed25519.PrivateKey, pvc string) string {
		return upload.Sign(k, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: pvc, UID: "uid-" + pvc, Expires: time.Now().Add(time.Minute).Unix()})
	}
	// A token for the PVC a deleted DataVolume "ready" had before.
	earlier := upload.Sign(key, upload.Claims{Operation: upload.Operation, Namespace: "ns", PVC: "ready", UID: "uid-before", Expires: time.Now().Add(time.Minute).Unix()})
	for name, tc := range map[string]struct {
		token string
		code  int
		want  string
	}{
		"no token":      {"", http.StatusUnauthorized, "Bearer header"},
		"forged token":  {token(otherKey, "ready"), http.StatusUnauthorized, "bad signature"},
		"no DataVolume": {token(key, "gone"), http.StatusNotFound, "no DataVolume ns/gone"},
		"not an upload": {token(key, "http"), http.StatusBadRequest, "has no upload source"},
		"not ready":     {token(key, "scheduled"), http.StatusServiceUnavailable, "UploadScheduled, not UploadReady"},
		"earlier PVC":   {earlier, http.StatusUnauthorized, "for an earlier PVC ns/ready"},
		"forwarded":     {token(key, "ready"), http.StatusOK, ""},
	} {
		t.Run(name, func(t *testing.T) {
			rec.got = nil
			req, _ := http.NewRequest(http.MethodPost, srv.URL+upload.AsyncPath, strings.NewReader("data"))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			msg, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || !strings.Contains(string(msg), tc.want) {
				t.Fatalf("got %d %q, want %d with %q", resp.StatusCode, msg, tc.code, tc.want)
			}
			if (rec.got != nil) != (tc.code == http.StatusOK) {
				t.Fatalf("forwarded %v", rec.got != nil)
			}
			if rec.got != nil && (rec.got.URL.String() != "http://10.0.0.5:8089"+upload.AsyncPath || rec.got.Header.Get("Authorization") != "Bearer "+tc.token) {
				t.Fatalf("forwarded to %s with %q", rec.got.URL, rec.got.Header.Get("Authorization"))
			}
		})
	}
}
