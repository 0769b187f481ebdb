package handler

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/netutil"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
)

// AddressAnnotation on a Node, and on each VMI it runs, says where the
// node's handler serves exec requests (host:port).
const AddressAnnotation = guestexec.AddressAnnotation

// ExecGroup, ExecResource and ExecSubresource are what a caller must be
// allowed to "create" to run programs in a VMI's guest, as with pods/exec.
const (
	ExecGroup       = "subresources.kubevirt.io"
	ExecResource    = "virtualmachineinstances"
	ExecSubresource = "exec"
)

// ExecServer serves guest-agent exec for the VMIs on this node over HTTPS,
// authenticating callers with TokenReview and authorizing them with
// SubjectAccessReview.
type ExecServer struct {
	*Handler
	// Addr is host:port to listen on; Advertise is what the Node annotation says.
	Addr, Advertise string
	// CertFile and KeyFile are the serving certificate, signed by tekvirt's
	// CA for the node's name; reloaded when the operator renews them.
	CertFile, KeyFile string
}

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;patch

// ExecAudience is the audience exec tokens must be for: a token a client
// would also send elsewhere (its plain service account token) is refused,
// so that a token the handler sees can be used nowhere else.
const ExecAudience = "tekvirt-handler"

// maxExecConns caps the exec server's open connections.
const maxExecConns = 4096

// Start serves until ctx ends, after announcing the address on the Node.
func (s ExecServer) Start(ctx context.Context) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, AddressAnnotation, s.Advertise)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Node}}
	if err := s.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("announcing the exec address on node %s: %w", s.Node, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/"+ExecGroup+"/v1/namespaces/{namespace}/"+ExecResource+"/{name}/"+ExecSubresource, s.serveExec)
	s.routeOps(mux)
	// Exec requests are small: bound reading them, idle connections and
	// the number of connections, so that clients that never send a
	// request cannot pin the handler's file descriptors.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	cw, err := certwatcher.New(s.CertFile, s.KeyFile)
	if err != nil {
		return fmt.Errorf("loading the exec serving certificate: %w", err)
	}
	go func() { _ = cw.Start(ctx) }()
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate}
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("serving exec on %s: %w", s.Addr, err)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	ctrl.LoggerFrom(ctx).Info("serving guest exec", "addr", s.Addr, "advertised", s.Advertise)
	if err := srv.ServeTLS(netutil.LimitListener(l, maxExecConns), "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving exec on %s: %w", s.Addr, err)
	}
	return nil
}

func (s ExecServer) serveExec(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if code, err := s.authorize(ctx, r, "create", ExecSubresource, ns, name); err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	var req guestexec.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Command == "" {
		http.Error(w, fmt.Sprintf("bad exec request: want JSON {command, args, timeoutSeconds}: %v", err), http.StatusBadRequest)
		return
	}
	d, ok := s.runningHere(ctx, w, ns, name)
	if !ok {
		return
	}
	res, err := d.client().Exec(ctx, req)
	if err != nil {
		code := http.StatusBadGateway
		if strings.Contains(err.Error(), "did not finish in time") || errors.Is(err, context.DeadlineExceeded) {
			code = http.StatusGatewayTimeout
		}
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: %v", ns, name, err), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// runningHere is the directory of VMI ns/name when it runs on this node;
// otherwise it answers the request and returns false.
func (s ExecServer) runningHere(ctx context.Context, w http.ResponseWriter, ns, name string) (vmDir, bool) {
	vmi := &v1.VirtualMachineInstance{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
		code := http.StatusInternalServerError
		if apierrors.IsNotFound(err) {
			code = http.StatusNotFound
		}
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: %v", ns, name, err), code)
		return vmDir{}, false
	}
	if vmi.Status.NodeName != s.Node || vmi.Status.Phase != v1.Running {
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s is %s on node %q, not Running on %s", ns, name, vmi.Status.Phase, vmi.Status.NodeName, s.Node), http.StatusConflict)
		return vmDir{}, false
	}
	d, err := s.dirFor(vmi)
	if err != nil {
		http.Error(w, fmt.Sprintf("VirtualMachineInstance %s/%s: %v", ns, name, err), http.StatusInternalServerError)
		return vmDir{}, false
	}
	return d, true
}

// authorize checks the caller's bearer token and its right to verb the
// VMI's subresource sub.
func (s ExecServer) authorize(ctx context.Context, r *http.Request, verb, sub, ns, name string) (int, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return http.StatusUnauthorized, errors.New("a bearer token is required")
	}
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{ExecAudience}}}
	if err := s.Client.Create(ctx, tr); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("reviewing the token: %w", err)
	}
	if !tr.Status.Authenticated || !slices.Contains(tr.Status.Audiences, ExecAudience) {
		return http.StatusUnauthorized, fmt.Errorf("token not accepted for audience %s: %s", ExecAudience, tr.Status.Error)
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Name: name, Verb: verb,
			Group: ExecGroup, Resource: ExecResource, Subresource: sub,
		},
	}}
	if err := s.Client.Create(ctx, sar); err != nil {
		return http.StatusInternalServerError, fmt.Errorf("reviewing access: %w", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Errorf("%s cannot %s %s/%s in group %s for %s/%s", u.Username, verb, ExecResource, sub, ExecGroup, ns, name)
	}
	return 0, nil
}
