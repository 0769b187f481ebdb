package hostedcp

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
)

// Apply server-side applies each object (typed, with its Kind set by the
// caller's scheme) under owner, taking over fields another owner set.
func Apply(ctx context.Context, c client.Client, owner string, objs ...client.Object) error {
	for _, o := range objs {
		gvk, err := c.GroupVersionKindFor(o)
		if err != nil {
			return err
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(owner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// PKI is the control plane's PKI Secret.
type PKI struct {
	Namespace string
	Data      map[string][]byte
}

// LoadPKI reads the PKI Secret of the control plane in ns.
func LoadPKI(ctx context.Context, c client.Reader, ns string) (*PKI, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hostedcluster.PKISecret}, s); err != nil {
		return nil, fmt.Errorf("reading the control plane's PKI (Secret %s/%s; run hosted-cluster-pki first): %w", ns, hostedcluster.PKISecret, err)
	}
	return &PKI{Namespace: ns, Data: s.Data}, nil
}

// Pair is the certificate and key name holds.
func (p *PKI) Pair(name string) (pki.KeyPair, error) {
	kp, err := pki.Parse(p.Data[hostedcluster.Cert(name)], p.Data[hostedcluster.Key(name)])
	if err != nil {
		return pki.KeyPair{}, fmt.Errorf("secret %s/%s, %s: %w", p.Namespace, hostedcluster.PKISecret, name, err)
	}
	return kp, nil
}

// Password reads the kubeadmin password of the control plane in ns.
func Password(ctx context.Context, c client.Reader, ns string) (string, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hostedcluster.KubeadminPasswordSecret}, s); err != nil {
		return "", fmt.Errorf("reading the kubeadmin password (Secret %s/%s; run hosted-cluster-pki first): %w", ns, hostedcluster.KubeadminPasswordSecret, err)
	}
	pw := string(s.Data[hostedcluster.PasswordKey])
	if pw == "" {
		return "", fmt.Errorf("secret %s/%s has no %s", ns, hostedcluster.KubeadminPasswordSecret, hostedcluster.PasswordKey)
	}
	return pw, nil
}

// ServiceIP is the ClusterIP of Service ns/name.
func ServiceIP(ctx context.Context, c client.Reader, ns, name string) (net.IP, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	if ip == nil {
		return nil, fmt.Errorf("service %s/%s has no cluster IP (%q)", ns, name, svc.Spec.ClusterIP)
	}
	return ip, nil
}

// LocalConfig is system:admin's client config from the control plane's
// local kubeconfig (the API server's ClusterIP), with a 10 s timeout.
func LocalConfig(ctx context.Context, c client.Reader, ns string) (*rest.Config, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: hostedcluster.LocalKubeconfigSecret}, s); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s (run hosted-cluster-control-plane first): %w", ns, hostedcluster.LocalKubeconfigSecret, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[hostedcluster.KubeconfigKey])
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ns, hostedcluster.LocalKubeconfigSecret, err)
	}
	cfg.Timeout = 10 * time.Second
	return cfg, nil
}

// Kubeconfig is a kubeconfig for server trusting caPEM, as user with a
// client certificate (certPEM, keyPEM) or a bearer token.
func Kubeconfig(cluster, server string, caPEM []byte, user string, certPEM, keyPEM []byte, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM, Token: token}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	cfg.CurrentContext = cluster
	return clientcmd.Write(*cfg)
}

// APIServerURL is the URL of the hosted API server at ip.
func APIServerURL(ip string) string {
	return "https://" + net.JoinHostPort(ip, fmt.Sprint(hostedcluster.APIServerPort))
}

// Wait polls check every interval until it is done, it fails or timeout
// passes, printing its status to out whenever it changes.
func Wait(ctx context.Context, out io.Writer, what string, timeout, interval time.Duration, check func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		done, status, err := check(ctx)
		if err != nil {
			return err
		}
		if status != last {
			fmt.Fprintf(out, "%s: %s\n", what, status)
			last = status
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %s", what, timeout, last)
		case <-time.After(interval):
		}
	}
}

// ServingCert is the certificate Secret ns/name holds when it is still
// current for req and signed by ca, else a new one signed by ca (issued
// true); the caller stores it.
func ServingCert(ctx context.Context, c client.Reader, ns, name string, ca pki.KeyPair, req pki.Request) (kp pki.KeyPair, issued bool, err error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err == nil {
		if kp, err := pki.Parse(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err == nil && pki.Current(kp.Cert, ca.Cert, req, time.Now()) {
			return kp, false, nil
		}
	}
	kp, err = pki.Sign(&ca, req, time.Now())
	return kp, err == nil, err
}

// SpreadOverNodes spreads the replicas of a control-plane component (its
// Pods carry labels) over the infrastructure's nodes where there are
// several, as HyperShift's HighlyAvailable policy does: no node runs more
// than one replica more than another. Nodes that are cordoned or tainted
// against the Pods do not count, so a drain or a single node still runs
// them all.
func SpreadOverNodes(labels map[string]string) []corev1.TopologySpreadConstraint {
	honor := corev1.NodeInclusionPolicyHonor
	return []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:    &metav1.LabelSelector{MatchLabels: labels},
		NodeTaintsPolicy: &honor, NodeAffinityPolicy: &honor,
	}}
}
