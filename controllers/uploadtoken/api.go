package uploadtoken

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/upload"
)

// Group and Version of the API served.
const (
	Group   = "upload.cdi.kubevirt.io"
	Version = "v1beta1"
)

// DefaultTTL is how long a token is valid, as CDI's.
const DefaultTTL = 5 * time.Minute

// API serves the group: discovery and create of uploadtokenrequests.
type API struct {
	Key ed25519.PrivateKey
	// Client reads the PVC a token is for: its UID goes into the token.
	Client client.Reader
	TTL    time.Duration
	// AllowedNames are the front proxy's client certificate names
	// (requestheader-allowed-names); empty allows any it signed.
	AllowedNames []string
	Log          logr.Logger
	Now          func() time.Time
}

var groupVersion = Group + "/" + Version

// Handler routes the API's paths.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /apis", a.authenticated(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{apiGroup()}})
	}))
	mux.HandleFunc("GET /apis/"+Group, a.authenticated(func(w http.ResponseWriter, _ *http.Request) {
		g := apiGroup()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		writeJSON(w, http.StatusOK, &g)
	}))
	mux.HandleFunc("GET /apis/"+groupVersion, a.authenticated(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: groupVersion,
			APIResources: []metav1.APIResource{{Name: "uploadtokenrequests", SingularName: "uploadtokenrequest", Namespaced: true,
				Kind: "UploadTokenRequest", Verbs: metav1.Verbs{"create"}}}})
	}))
	mux.HandleFunc("POST /apis/"+groupVersion+"/namespaces/{namespace}/uploadtokenrequests", a.authenticated(a.create))
	return mux
}

func apiGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: Version}
	return metav1.APIGroup{Name: Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

// authenticated lets through only requests the kube-apiserver proxied: a
// client certificate verified against the front proxy's CA, with an
// allowed name.
func (a *API) authenticated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "a client certificate of the front proxy is required")
			return
		}
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if len(a.AllowedNames) > 0 && !slices.Contains(a.AllowedNames, cn) {
			writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, fmt.Sprintf("client certificate %q is not an allowed front proxy", cn))
			return
		}
		h(w, r)
	}
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("namespace")
	req := &uploadv1beta1.UploadTokenRequest{}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(req); err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "decoding the UploadTokenRequest: "+err.Error())
		return
	}
	if msgs := validation.IsDNS1123Subdomain(req.Spec.PvcName); len(msgs) > 0 {
		writeStatus(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("spec.pvcName %q: %v", req.Spec.PvcName, msgs))
		return
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := a.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: req.Spec.PvcName}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("PersistentVolumeClaim %s/%s not found: create the DataVolume first", ns, req.Spec.PvcName))
			return
		}
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("reading PersistentVolumeClaim %s/%s: %v", ns, req.Spec.PvcName, err))
		return
	}
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	ttl := a.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	req.Status.Token = upload.Sign(a.Key, upload.Claims{Operation: upload.Operation,
		Namespace: ns, PVC: req.Spec.PvcName, UID: string(pvc.UID), IssuedAt: now.Unix(), Expires: now.Add(ttl).Unix()})
	req.APIVersion, req.Kind = groupVersion, "UploadTokenRequest"
	req.Namespace, req.CreationTimestamp = ns, metav1.NewTime(now)
	if req.Name == "" && req.GenerateName != "" {
		req.Name = req.GenerateName
	}
	a.Log.Info("issued an upload token", "namespace", ns, "pvc", req.Spec.PvcName, "user", r.Header.Get("X-Remote-User"), "expires", now.Add(ttl).UTC())
	writeJSON(w, http.StatusCreated, req)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}
