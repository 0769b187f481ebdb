package generatesshkeys

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Params are the task's params, plus the TaskRun's namespace as the default.
type Params struct {
	PublicKeySecretName         string
	PublicKeySecretNamespace    string
	PrivateKeySecretName        string
	PrivateKeySecretNamespace   string
	PrivateKeyConnectionOptions []string
	AdditionalSSHKeygenOptions  string
	// DefaultNamespace is the "active namespace" of the TaskRun.
	DefaultNamespace string
}

// Results are the task's results.
type Results struct {
	PublicKeySecretName       string
	PublicKeySecretNamespace  string
	PrivateKeySecretName      string
	PrivateKeySecretNamespace string
}

// Map returns the results keyed by their names in task.yaml.
func (r Results) Map() map[string]string {
	return map[string]string{
		"publicKeySecretName":       r.PublicKeySecretName,
		"publicKeySecretNamespace":  r.PublicKeySecretNamespace,
		"privateKeySecretName":      r.PrivateKeySecretName,
		"privateKeySecretNamespace": r.PrivateKeySecretNamespace,
	}
}

// connectionOptions are the keys execute-in-vm reads from a connection Secret.
var connectionOptions = map[string]bool{
	"user":                             true,
	"host-public-key":                  true,
	"disable-strict-host-key-checking": true,
	"additional-ssh-options":           true,
}

// ParseConnectionOptions turns ["key:value", ...] into Secret data.
func ParseConnectionOptions(opts []string) (map[string][]byte, error) {
	data := map[string][]byte{}
	for _, o := range opts {
		if o == "" {
			continue
		}
		k, v, ok := strings.Cut(o, ":")
		if !ok || k == "" {
			return nil, fmt.Errorf("privateKeyConnectionOptions: %q is not in key:value form", o)
		}
		if !connectionOptions[k] {
			return nil, fmt.Errorf("privateKeyConnectionOptions: unknown option %q (known: user, host-public-key, disable-strict-host-key-checking, additional-ssh-options)", k)
		}
		data[k] = []byte(v)
	}
	return data, nil
}

// Run generates the key pair and stores it. The private key Secret is
// created first and removed again if the public key cannot be stored, so a
// failed run leaves no half-made pair behind.
func Run(ctx context.Context, cs kubernetes.Interface, p Params) (Results, error) {
	spec, err := ParseKeygenOptions(p.AdditionalSSHKeygenOptions)
	if err != nil {
		return Results{}, err
	}
	conn, err := ParseConnectionOptions(p.PrivateKeyConnectionOptions)
	if err != nil {
		return Results{}, err
	}
	res := Results{
		PublicKeySecretName: p.PublicKeySecretName, PublicKeySecretNamespace: orDefault(p.PublicKeySecretNamespace, p.DefaultNamespace),
		PrivateKeySecretName: p.PrivateKeySecretName, PrivateKeySecretNamespace: orDefault(p.PrivateKeySecretNamespace, p.DefaultNamespace),
	}
	if res.PublicKeySecretNamespace == "" || res.PrivateKeySecretNamespace == "" {
		return Results{}, errors.New("no namespace given and the TaskRun namespace is unknown")
	}
	if res.PrivateKeySecretName != "" {
		_, err := cs.CoreV1().Secrets(res.PrivateKeySecretNamespace).Get(ctx, res.PrivateKeySecretName, metav1.GetOptions{})
		if err == nil {
			return Results{}, fmt.Errorf("private key secret %s/%s already exists: generate-ssh-keys never overwrites a private key; choose a new privateKeySecretName", res.PrivateKeySecretNamespace, res.PrivateKeySecretName)
		}
		if !apierrors.IsNotFound(err) {
			return Results{}, fmt.Errorf("checking private key secret %s/%s: %w", res.PrivateKeySecretNamespace, res.PrivateKeySecretName, err)
		}
	}
	keys, err := Generate(spec)
	if err != nil {
		return Results{}, err
	}
	priv, err := createPrivateKeySecret(ctx, cs, res.PrivateKeySecretNamespace, res.PrivateKeySecretName, keys, conn)
	if err != nil {
		return Results{}, err
	}
	res.PrivateKeySecretName = priv.Name
	name, err := appendPublicKey(ctx, cs, res.PublicKeySecretNamespace, res.PublicKeySecretName, keys.AuthorizedKey)
	if err != nil {
		if derr := cs.CoreV1().Secrets(priv.Namespace).Delete(context.WithoutCancel(ctx), priv.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &priv.UID},
		}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("removing private key secret %s/%s again: %w", priv.Namespace, priv.Name, derr))
		}
		return Results{}, err
	}
	res.PublicKeySecretName = name
	return res, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func createPrivateKeySecret(ctx context.Context, cs kubernetes.Interface, ns, name string, keys KeyPair, conn map[string][]byte) (*corev1.Secret, error) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/created-by": "generate-ssh-keys"}},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{corev1.SSHAuthPrivateKey: keys.PrivateKeyPEM},
	}
	if name == "" {
		s.GenerateName = "private-key-"
	}
	for k, v := range conn {
		s.Data[k] = v
	}
	out, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("private key secret %s/%s already exists: generate-ssh-keys never overwrites a private key", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("creating private key secret in %s: %w", ns, err)
	}
	return out, nil
}

// appendPublicKey adds the key under a new data key of the named Secret,
// creating the Secret (with a generated name when name is empty) if needed.
func appendPublicKey(ctx context.Context, cs kubernetes.Interface, ns, name, authorizedKey string) (string, error) {
	dataKey, err := newDataKey()
	if err != nil {
		return "", err
	}
	secrets := cs.CoreV1().Secrets(ns)
	if name == "" {
		s, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "public-key-", Labels: map[string]string{"app.kubernetes.io/created-by": "generate-ssh-keys"}},
			Data:       map[string][]byte{dataKey: []byte(authorizedKey)},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("creating public key secret in %s: %w", ns, err)
		}
		return s.Name, nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/created-by": "generate-ssh-keys"}},
				Data:       map[string][]byte{dataKey: []byte(authorizedKey)},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile: go round again and append to it.
				return apierrors.NewConflict(corev1.Resource("secrets"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[dataKey] = []byte(authorizedKey)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("appending public key to secret %s/%s: %w", ns, name, err)
	}
	return name, nil
}

// newDataKey names the data entry of one public key, unique per run so that
// appending never replaces another key.
func newDataKey() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "key-" + hex.EncodeToString(b), nil
}
