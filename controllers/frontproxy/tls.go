package frontproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=extension-apiserver-authentication,verbs=get

// ServerTLS is the serving TLS config (certDir's tls.crt and tls.key,
// reloaded by the returned watcher when the operator renews them, once the
// caller runs it) that verifies client certificates against the front
// proxy's CA, and the allowed client names, both as the kube-apiserver
// publishes them in kube-system/extension-apiserver-authentication.
func ServerTLS(ctx context.Context, c client.Reader, certDir string) (*tls.Config, []string, *certwatcher.CertWatcher, error) {
	cw, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, cm); err != nil {
		return nil, nil, nil, fmt.Errorf("reading the front proxy's CA: %w", err)
	}
	caPEM := cm.Data["requestheader-client-ca-file"]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		return nil, nil, nil, fmt.Errorf("kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: start the kube-apiserver with --requestheader-client-ca-file")
	}
	var names []string
	if s := cm.Data["requestheader-allowed-names"]; s != "" {
		if err := json.Unmarshal([]byte(s), &names); err != nil {
			return nil, nil, nil, fmt.Errorf("requestheader-allowed-names: %w", err)
		}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cw.GetCertificate,
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}, names, cw, nil
}
