package guestrun

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
)

// HandlerTokenDir holds the step's service account token for the node
// handler (token), projected by the kubelet for HandlerAudience only: sent
// to anything else, it is refused there, and the API server refuses it too.
const (
	HandlerTokenDir = "/var/run/secrets/tekvirt.io/handler"
	HandlerAudience = "tekvirt-handler"
)

// HTTPExecutor calls the handler's exec endpoint with the step's handler
// token. It trusts only tekvirt's CA bundle, and only a certificate for the
// VMI's node (status.nodeName, which only the cluster's components write):
// an address a user wrote into the VMI's annotation cannot lead it, and its
// token, anywhere else.
type HTTPExecutor struct {
	// CA returns the PEM bundle the handlers' certificates are verified with.
	CA func(context.Context) ([]byte, error)
	// TokenDir holds the audience-bound token (HandlerTokenDir).
	TokenDir string
	// Attempts to connect before giving up (network blips).
	Attempts int
}

// Exec implements Executor.
func (h HTTPExecutor) Exec(ctx context.Context, address string, vmi *v1.VirtualMachineInstance, req guestexec.Request) (*guestexec.Result, error) {
	token, err := os.ReadFile(filepath.Join(h.TokenDir, "token"))
	if err != nil {
		return nil, fmt.Errorf("reading the handler token: %w", err)
	}
	if vmi.Status.NodeName == "" {
		return nil, fmt.Errorf("VirtualMachineInstance %s/%s runs on no node", vmi.Namespace, vmi.Name)
	}
	caPEM, err := h.CA(ctx)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in tekvirt's CA bundle")
	}
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: vmi.Status.NodeName}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://%s/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/exec", address, vmi.Namespace, vmi.Name)
	var resp *http.Response
	for attempt := 1; ; attempt++ {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		hreq.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		hreq.Header.Set("Content-Type", "application/json")
		resp, err = hc.Do(hreq)
		if err == nil {
			break
		}
		var opErr *net.OpError
		if attempt >= max(1, h.Attempts) || !errors.As(err, &opErr) || ctx.Err() != nil {
			return nil, fmt.Errorf("calling the node handler at %s: %w", address, err)
		}
		time.Sleep(time.Duration(attempt) * time.Second)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the handler's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node handler: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	res := &guestexec.Result{}
	if err := json.Unmarshal(data, res); err != nil {
		return nil, fmt.Errorf("decoding the handler's answer: %w", err)
	}
	return res, nil
}

// NodeExecutor is the HTTPExecutor a step uses: tekvirt's CA read through
// c, the handler token projected into the step, three attempts.
func NodeExecutor(ca func(context.Context) ([]byte, error)) HTTPExecutor {
	return HTTPExecutor{CA: ca, TokenDir: HandlerTokenDir, Attempts: 3}
}
