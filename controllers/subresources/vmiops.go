package subresources

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/controllers/frontproxy"
)

// The VMI operations served, as KubeVirt names its subresources; reads are
// GET (verb get), the rest PUT (verb update). The node handler running the
// VMI carries them out in its launcher.
var (
	vmiReads   = []string{"guestosinfo", "userlist", "filesystemlist"}
	vmiChanges = []string{"pause", "unpause", "softreboot", "freeze", "unfreeze"}
)

// +kubebuilder:rbac:groups=subresources.kubevirt.io,resources=virtualmachineinstances/guestosinfo;virtualmachineinstances/userlist;virtualmachineinstances/filesystemlist,verbs=get
// +kubebuilder:rbac:groups=subresources.kubevirt.io,resources=virtualmachineinstances/pause;virtualmachineinstances/unpause;virtualmachineinstances/softreboot;virtualmachineinstances/freeze;virtualmachineinstances/unfreeze,verbs=update

// Handlers reaches the node handler that runs a VMI: HTTPS verified with
// tekvirt's CA for the node's name, authenticated with the controller's
// token for the handlers' audience (the handler authorizes the controller
// for the same subresource, so it never acts for a caller this API did not
// check).
type Handlers struct {
	// TokenFile holds the token (a projected service account token, which
	// the kubelet renews); CAFile the CA bundle (a ConfigMap volume).
	TokenFile, CAFile string
	// Timeout bounds one call (0: 30 s).
	Timeout time.Duration
}

// request is method op with query to the handler running vmi, and a
// client that reaches it.
func (h *Handlers) request(ctx context.Context, vmi *v1.VirtualMachineInstance, method, op string, query url.Values) (*http.Client, *http.Request, error) {
	addr := vmi.Annotations[guestexec.AddressAnnotation]
	if addr == "" || vmi.Status.NodeName == "" {
		return nil, nil, fmt.Errorf("VirtualMachineInstance %s/%s has no node handler address yet", vmi.Namespace, vmi.Name)
	}
	token, err := os.ReadFile(h.TokenFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the handler token: %w", err)
	}
	ca, err := os.ReadFile(h.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading tekvirt's CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, nil, fmt.Errorf("no certificate in %s", h.CAFile)
	}
	// A client per call, as the token and CA files rotate: it keeps no
	// connection idle once the call is done.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: vmi.Status.NodeName}}}
	u := url.URL{Scheme: "https", Host: addr, Path: fmt.Sprintf("/apis/%s/%s/namespaces/%s/virtualmachineinstances/%s/%s", Group, Version, vmi.Namespace, vmi.Name, op),
		RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	return hc, req, nil
}

// call sends method op with query to the handler running vmi and returns
// the answer's code and body.
func (h *Handlers) call(ctx context.Context, vmi *v1.VirtualMachineInstance, method, op string, query url.Values) (int, []byte, error) {
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc, req, err := h.request(ctx, vmi, method, op, query)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("reaching the handler of node %s: %w", vmi.Status.NodeName, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, body, err
}

var vmiResource = v1.Resource("virtualmachineinstance")

func vmiConflict(name, msg string) error {
	return apierrors.NewConflict(vmiResource, name, errors.New(msg))
}

func hasCondition(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// validateOp refuses op on vmi as KubeVirt does, before any node is asked.
func validateOp(op string, vmi *v1.VirtualMachineInstance) error {
	if err := vmiRunning(vmi); err != nil {
		return err
	}
	paused := hasCondition(vmi, v1.VirtualMachineInstancePaused)
	switch op {
	case "pause":
		if vmi.Spec.LivenessProbe != nil {
			return apierrors.NewForbidden(vmiResource, vmi.Name, errors.New("pausing VMIs with LivenessProbe is currently not supported"))
		}
		if paused {
			return vmiConflict(vmi.Name, "VMI is already paused")
		}
	case "unpause":
		if !paused {
			return vmiConflict(vmi.Name, "VMI is not paused")
		}
	case "softreboot":
		if paused {
			return vmiConflict(vmi.Name, "VMI is paused")
		}
		if acpi := vmi.Spec.Domain.Features; !hasCondition(vmi, v1.VirtualMachineInstanceAgentConnected) &&
			acpi != nil && acpi.ACPI.Enabled != nil && !*acpi.ACPI.Enabled {
			return vmiConflict(vmi.Name, "VMI neither have the agent connected nor the ACPI feature enabled")
		}
	case "guestosinfo", "userlist", "filesystemlist", "freeze", "unfreeze":
		if !hasCondition(vmi, v1.VirtualMachineInstanceAgentConnected) {
			return vmiConflict(vmi.Name, "VMI does not have guest agent connected")
		}
	}
	return nil
}

// vmiOp serves one VMI operation: the caller must be allowed verb on
// virtualmachineinstances/op; the VMI's state must allow it; the node's
// handler carries it out (unless a dry run) and its answer is returned.
func (a *API) vmiOp(op, verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if err := a.authorize(ctx, verb, "virtualmachineinstances", op, ns, name); err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		var opts struct {
			DryRun          []string         `json:"dryRun,omitempty"`
			UnfreezeTimeout *metav1.Duration `json:"unfreezeTimeout,omitempty"`
		}
		if body, err := readBody(r); err != nil || decode(body, &opts) != nil {
			frontproxy.WriteStatus(w, apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %v", err)))
			return
		}
		vmi := &v1.VirtualMachineInstance{}
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vmi); err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		if err := validateOp(op, vmi); err != nil {
			frontproxy.WriteStatus(w, err)
			return
		}
		if slices.Equal(opts.DryRun, []string{metav1.DryRunAll}) {
			w.WriteHeader(http.StatusOK)
			return
		}
		query := url.Values{}
		if opts.UnfreezeTimeout != nil {
			query.Set("unfreezeTimeout", opts.UnfreezeTimeout.Duration.String())
		}
		method := http.MethodPut
		if verb == "get" {
			method = http.MethodGet
		}
		code, body, err := a.Handlers.call(ctx, vmi, method, op, query)
		switch {
		case err != nil:
			frontproxy.WriteStatus(w, apierrors.NewServiceUnavailable(err.Error()))
		case code == http.StatusConflict:
			frontproxy.WriteStatus(w, vmiConflict(name, strings.TrimSpace(string(body))))
		case code/100 != 2:
			frontproxy.WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("%s", strings.TrimSpace(string(body)))))
		case verb == "get":
			var v json.RawMessage = body
			frontproxy.WriteJSON(w, http.StatusOK, v)
		default:
			u, _ := frontproxy.User(ctx)
			a.Log.Info("VMI operation", "operation", op, "namespace", ns, "name", name, "user", u.Username)
			w.WriteHeader(http.StatusOK)
		}
	}
}

// Freeze freezes vmi's file systems through its node's handler, as the
// freeze subresource does; they thaw by themselves after unfreezeAfter.
func (h *Handlers) Freeze(ctx context.Context, vmi *v1.VirtualMachineInstance, unfreezeAfter time.Duration) error {
	query := url.Values{}
	if unfreezeAfter > 0 {
		query.Set("unfreezeTimeout", unfreezeAfter.String())
	}
	return h.change(ctx, vmi, "freeze", query)
}

// Unfreeze thaws vmi's file systems through its node's handler.
func (h *Handlers) Unfreeze(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	return h.change(ctx, vmi, "unfreeze", nil)
}

// change runs the VMI operation op (a change) on vmi's node.
func (h *Handlers) change(ctx context.Context, vmi *v1.VirtualMachineInstance, op string, query url.Values) error {
	code, body, err := h.call(ctx, vmi, http.MethodPut, op, query)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("%s of VirtualMachineInstance %s/%s: %s", op, vmi.Namespace, vmi.Name, strings.TrimSpace(string(body)))
	}
	return nil
}
