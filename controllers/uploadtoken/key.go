package uploadtoken

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeySecret holds the token signing key (key "ed25519.seed").
const KeySecret = "tekvirt-upload-token-key"

const seedKey = "ed25519.seed"

// +kubebuilder:rbac:groups="",namespace=tekvirt-system,resources=secrets,verbs=get;create

// LoadOrCreateKey returns the signing key kept in KeySecret in namespace,
// creating it on first use, so tokens stay valid across controller restarts.
// c must read through to the API server (the manager's cache is not started).
func LoadOrCreateKey(ctx context.Context, c client.Client, namespace string) (ed25519.PrivateKey, error) {
	for range 2 {
		s := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: KeySecret}, s)
		if err == nil {
			seed := s.Data[seedKey]
			if len(seed) != ed25519.SeedSize {
				return nil, fmt.Errorf("secret %s/%s: %s holds %d bytes, want %d", namespace, KeySecret, seedKey, len(seed), ed25519.SeedSize)
			}
			return ed25519.NewKeyFromSeed(seed), nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading secret %s/%s: %w", namespace, KeySecret, err)
		}
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: KeySecret, Labels: map[string]string{"app.kubernetes.io/part-of": "tekvirt"}},
			Data:       map[string][]byte{seedKey: seed},
		}
		err = c.Create(ctx, s)
		if err == nil {
			return ed25519.NewKeyFromSeed(seed), nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating secret %s/%s: %w", namespace, KeySecret, err)
		}
		// Another replica created it first: read theirs.
	}
	return nil, fmt.Errorf("secret %s/%s: created and deleted concurrently", namespace, KeySecret)
}
