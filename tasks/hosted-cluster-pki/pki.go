package hostedclusterpki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// FieldOwner is the task's server-side apply owner.
const FieldOwner = "hosted-cluster-pki"

// Lifetimes: the CAs outlive every certificate they sign many times over.
const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	clientLifetime = 365 * 24 * time.Hour
)

// Params are the task's params.
type Params struct {
	Namespace string // the control-plane namespace
}

// Result names the Secrets made.
type Result struct{ PKISecret, PasswordSecret string }

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{"pkiSecretName": r.PKISecret, "kubeadminPasswordSecretName": r.PasswordSecret}
}

// identity is one entry of the PKI Secret.
type identity struct {
	name   string
	issuer string // "" for a CA
	req    pki.Request
}

// identities are every entry, CAs first.
var identities = []identity{
	{name: hc.CAKey, req: pki.Request{CommonName: "hosted-cluster-ca", IsCA: true, Lifetime: caLifetime}},
	{name: hc.EtcdCAKey, req: pki.Request{CommonName: "hosted-cluster-etcd-ca", IsCA: true, Lifetime: caLifetime}},
	{name: hc.KonnectivityCAKey, req: pki.Request{CommonName: "hosted-cluster-konnectivity-ca", IsCA: true, Lifetime: caLifetime}},
	{name: hc.AdminClient, issuer: hc.CAKey, req: clientCert("system:admin", "system:masters")},
	{name: hc.ControllerManagerClient, issuer: hc.CAKey, req: clientCert("system:kube-controller-manager")},
	{name: hc.SchedulerClient, issuer: hc.CAKey, req: clientCert("system:kube-scheduler")},
	{name: hc.KubeletClient, issuer: hc.CAKey, req: clientCert("kube-apiserver-kubelet-client", "system:masters")},
	{name: hc.EtcdClient, issuer: hc.EtcdCAKey, req: clientCert("kube-apiserver-etcd-client")},
	{name: hc.EtcdPeerClient, issuer: hc.EtcdCAKey, req: clientCert(hc.EtcdPeerCommonName)},
	{name: hc.KonnectivityAgentClient, issuer: hc.KonnectivityCAKey, req: clientCert("system:konnectivity-agent")},
}

func clientCert(cn string, orgs ...string) pki.Request {
	return pki.Request{CommonName: cn, Organization: orgs, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, Lifetime: clientLifetime}
}

// Plan returns the PKI Secret's data for have (nil for none) at now: every
// entry kept that is still valid and signed by its (kept) issuer, the rest
// made anew, and the names of those made.
func Plan(have map[string][]byte, now time.Time) (map[string][]byte, []string, error) {
	out := map[string][]byte{}
	pairs := map[string]pki.KeyPair{}
	var made []string
	for _, id := range identities {
		var parent *pki.KeyPair
		if id.issuer != "" {
			p := pairs[id.issuer]
			parent = &p
		}
		kp, err := pki.Parse(have[hc.Cert(id.name)], have[hc.Key(id.name)])
		keep := err == nil
		if keep && parent != nil {
			keep = pki.Current(kp.Cert, parent.Cert, id.req, now)
		}
		if keep && parent == nil {
			keep = kp.Cert.IsCA && kp.Cert.Subject.CommonName == id.req.CommonName && now.Before(pki.RenewAt(kp.Cert))
		}
		if !keep {
			if kp, err = pki.Sign(parent, id.req, now); err != nil {
				return nil, nil, err
			}
			made = append(made, id.name)
		}
		pairs[id.name] = kp
		out[hc.Cert(id.name)], out[hc.Key(id.name)] = kp.CertPEM, kp.KeyPEM
	}
	sa, err := serviceAccountKey(have)
	if err != nil {
		return nil, nil, err
	}
	if sa == nil {
		if sa, err = newServiceAccountKey(); err != nil {
			return nil, nil, err
		}
		made = append(made, hc.ServiceAccountKey)
	}
	for k, v := range sa {
		out[k] = v
	}
	return out, made, nil
}

// serviceAccountKey keeps the signing key pair when both halves are there
// and match: a new key would invalidate every token the cluster issued.
func serviceAccountKey(have map[string][]byte) (map[string][]byte, error) {
	kb, _ := pem.Decode(have[hc.Key(hc.ServiceAccountKey)])
	pb, _ := pem.Decode(have[hc.ServiceAccountKey+".pub"])
	if kb == nil || pb == nil {
		return nil, nil
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil //nolint:nilerr // unreadable: made anew
	}
	pub, err := x509.ParsePKIXPublicKey(pb.Bytes)
	if err != nil || !key.PublicKey.Equal(pub) {
		return nil, nil //nolint:nilerr // unreadable or mismatched: made anew
	}
	return map[string][]byte{hc.Key(hc.ServiceAccountKey): have[hc.Key(hc.ServiceAccountKey)], hc.ServiceAccountKey + ".pub": have[hc.ServiceAccountKey+".pub"]}, nil
}

func newServiceAccountKey() (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		hc.Key(hc.ServiceAccountKey):  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		hc.ServiceAccountKey + ".pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
	}, nil
}

// NewPassword is a kubeadmin password in OpenShift's shape: four groups of
// five characters, 23 in all (about 119 bits).
func NewPassword() (string, error) {
	const alphabet = "23456789abcdefghijkmnopqrstuvwxyzABCDEFGHIJKLMNPQRSTUVWXYZ"
	var b strings.Builder
	for i := range 20 {
		if i > 0 && i%5 == 0 {
			b.WriteByte('-')
		}
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b.WriteByte(alphabet[n.Int64()])
	}
	return b.String(), nil
}

// Run makes or keeps the PKI Secret and the kubeadmin password in p.Namespace.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (Result, error) {
	if p.Namespace == "" {
		return Result{}, fmt.Errorf("controlPlaneNamespace is required")
	}
	res := Result{PKISecret: hc.PKISecret, PasswordSecret: hc.KubeadminPasswordSecret}
	have := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: hc.PKISecret}, have)
	if err != nil && !apierrors.IsNotFound(err) {
		return res, fmt.Errorf("reading Secret %s/%s: %w", p.Namespace, hc.PKISecret, err)
	}
	data, made, err := Plan(have.Data, time.Now())
	if err != nil {
		return res, err
	}
	if len(made) > 0 {
		if err := hostedcp.Apply(ctx, c, FieldOwner, secret(p.Namespace, hc.PKISecret, data)); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "Secret %s/%s: made %s\n", p.Namespace, hc.PKISecret, strings.Join(made, ", "))
	} else {
		fmt.Fprintf(out, "Secret %s/%s: every certificate and key still valid, kept\n", p.Namespace, hc.PKISecret)
	}
	if _, err := hostedcp.Password(ctx, c, p.Namespace); err == nil {
		fmt.Fprintf(out, "Secret %s/%s: kept\n", p.Namespace, hc.KubeadminPasswordSecret)
		return res, nil
	}
	pw, err := NewPassword()
	if err != nil {
		return res, err
	}
	if err := hostedcp.Apply(ctx, c, FieldOwner, secret(p.Namespace, hc.KubeadminPasswordSecret, map[string][]byte{hc.PasswordKey: []byte(pw)})); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "Secret %s/%s: made\n", p.Namespace, hc.KubeadminPasswordSecret)
	return res, nil
}

func secret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{hc.ComponentLabel: "pki"}},
		Type:       corev1.SecretTypeOpaque, Data: data,
	}
}
