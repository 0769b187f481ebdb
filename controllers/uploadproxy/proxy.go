package uploadproxy

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	pipelinev1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/datastep"
	"github.com/tekvirt/tekvirt/contracts/upload"
	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get
// +kubebuilder:rbac:groups=tekton.dev,resources=taskruns,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=get

// Proxy forwards authorized uploads to the DataVolume's upload step.
type Proxy struct {
	Client    client.Reader
	PublicKey ed25519.PublicKey
	Log       logr.Logger
	// Transport reaches the step's pod; nil is http.DefaultTransport.
	Transport http.RoundTripper
}

// Handler routes the upload paths and /healthz.
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	for _, path := range upload.Paths {
		mux.HandleFunc("POST "+path, p.upload)
	}
	return mux
}

// httpError is an answer with a status code.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func (p *Proxy) upload(w http.ResponseWriter, r *http.Request) {
	target, err := p.target(r)
	if err != nil {
		code := http.StatusInternalServerError
		var he *httpError
		if errors.As(err, &he) {
			code = he.code
		}
		http.Error(w, err.Error(), code)
		return
	}
	p.Log.Info("forwarding an upload", "target", target.Host, "path", r.URL.Path, "bytes", r.ContentLength)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.Host = target.Host },
		Transport:     p.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "forwarding the upload: "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// target checks the token and finds the upload step of the DataVolume it
// names.
func (p *Proxy) target(r *http.Request) (*url.URL, error) {
	token := upload.BearerToken(r.Header.Get("Authorization"))
	if token == "" {
		return nil, &httpError{http.StatusUnauthorized, "an Authorization: Bearer header with an upload token is required"}
	}
	claims, err := upload.Verify(p.PublicKey, token, time.Now())
	if err != nil {
		return nil, &httpError{http.StatusUnauthorized, err.Error()}
	}
	ctx := r.Context()
	dv := &cdiv1.DataVolume{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: claims.Namespace, Name: claims.PVC}, dv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &httpError{http.StatusNotFound, fmt.Sprintf("no DataVolume %s/%s: uploads go into a DataVolume with spec.source.upload", claims.Namespace, claims.PVC)}
		}
		return nil, err
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: claims.Namespace, Name: claims.PVC}, pvc); err != nil {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("the PVC of DataVolume %s/%s: %v", dv.Namespace, dv.Name, err)}
	}
	if err := claims.For(pvc.Namespace, pvc.Name, string(pvc.UID)); err != nil {
		return nil, &httpError{http.StatusUnauthorized, err.Error()}
	}
	if src, err := datavolume.ResolveSource(ctx, p.Client, dv); err == nil {
		// A clone of a DataSource's PVC from another namespace receives too.
		dv.Spec.Source = src
	}
	if dv.Spec.Source == nil || !datavolume.Receives(dv) {
		return nil, &httpError{http.StatusBadRequest, fmt.Sprintf("DataVolume %s/%s has no upload source", dv.Namespace, dv.Name)}
	}
	if dv.Spec.Source.Upload != nil && dv.Status.Phase != cdiv1.UploadReady {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("DataVolume %s/%s is %s, not UploadReady", dv.Namespace, dv.Name, phase(dv))}
	}
	return p.uploadStep(ctx, dv)
}

// uploadStep is the address of the upload step of dv's current run.
func (p *Proxy) uploadStep(ctx context.Context, dv *cdiv1.DataVolume) (*url.URL, error) {
	run := &pipelinev1.TaskRun{}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: dv.Namespace, Name: datavolume.RunName(dv, dv.Status.RestartCount)}, run); err != nil {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("the upload run of DataVolume %s/%s: %v", dv.Namespace, dv.Name, err)}
	}
	pod := &corev1.Pod{}
	if run.Status.PodName == "" {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("TaskRun %s/%s has no pod yet", run.Namespace, run.Name)}
	}
	if err := p.Client.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Status.PodName}, pod); err != nil || pod.Status.PodIP == "" {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf("the upload pod %s/%s has no address yet", run.Namespace, run.Status.PodName)}
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(datastep.ProgressPort))}, nil
}

func phase(dv *cdiv1.DataVolume) string {
	if dv.Status.Phase == "" {
		return "Pending"
	}
	return string(dv.Status.Phase)
}
