package uploadtoken

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/upload"
	"github.com/tekvirt/tekvirt/controllers/frontproxy"
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
	mux.HandleFunc("GET /apis", frontproxy.Authenticated(a.AllowedNames, func(w http.ResponseWriter, _ *http.Request) {
		frontproxy.WriteJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{apiGroup()}})
	}))
	mux.HandleFunc("GET /apis/"+Group, frontproxy.Authenticated(a.AllowedNames, func(w http.ResponseWriter, _ *http.Request) {
		g := apiGroup()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		frontproxy.WriteJSON(w, http.StatusOK, &g)
	}))
	mux.HandleFunc("GET /apis/"+groupVersion, frontproxy.Authenticated(a.AllowedNames, func(w http.ResponseWriter, _ *http.Request) {
		frontproxy.WriteJSON(w, http.StatusOK, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: groupVersion,
			APIResources: []metav1.APIResource{{Name: "uploadtokenrequests", SingularName: "uploadtokenrequest", Namespaced: true,
				Kind: "UploadTokenRequest", Verbs: metav1.Verbs{"create"}}}})
	}))
	mux.HandleFunc("POST /apis/"+groupVersion+"/namespaces/{namespace}/uploadtokenrequests", frontproxy.Authenticated(a.AllowedNames, a.create))
	return mux
}

func apiGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: groupVersion, Version: Version}
	return metav1.APIGroup{Name: Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("namespace")
	req := &uploadv1beta1.UploadTokenRequest{}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(req); err != nil {
		frontproxy.WriteStatus(w, frontproxy.Error(http.StatusBadRequest, metav1.StatusReasonBadRequest, "decoding the UploadTokenRequest: "+err.Error()))
		return
	}
	if msgs := validation.IsDNS1123Subdomain(req.Spec.PvcName); len(msgs) > 0 {
		frontproxy.WriteStatus(w, frontproxy.Error(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("spec.pvcName %q: %v", req.Spec.PvcName, msgs)))
		return
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := a.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: req.Spec.PvcName}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			frontproxy.WriteStatus(w, frontproxy.Error(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("PersistentVolumeClaim %s/%s not found: create the DataVolume first", ns, req.Spec.PvcName)))
			return
		}
		frontproxy.WriteStatus(w, frontproxy.Error(http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("reading PersistentVolumeClaim %s/%s: %v", ns, req.Spec.PvcName, err)))
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
	frontproxy.WriteJSON(w, http.StatusCreated, req)
}
