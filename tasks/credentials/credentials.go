package credentials

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/datastep"
)

// Basic reads the user and password of a credentials Secret
// (datastep.AccessKeyIDKey, datastep.SecretKeyKey).
func Basic(ctx context.Context, r client.Reader, namespace, name string) (string, string, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		return "", "", fmt.Errorf("credentials secret %s/%s: %w", namespace, name, err)
	}
	user, pass := string(s.Data[datastep.AccessKeyIDKey]), string(s.Data[datastep.SecretKeyKey])
	if user == "" || pass == "" {
		return "", "", fmt.Errorf("credentials secret %s/%s needs %s and %s", namespace, name, datastep.AccessKeyIDKey, datastep.SecretKeyKey)
	}
	return user, pass, nil
}

// CABundle concatenates the PEM certificates of every key of a ConfigMap,
// in key order.
func CABundle(ctx context.Context, r client.Reader, namespace, name string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("certificate ConfigMap %s/%s: %w", namespace, name, err)
	}
	keys := make([]string, 0, len(cm.Data))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var pem []byte
	for _, k := range keys {
		pem = append(append(pem, cm.Data[k]...), '\n')
	}
	return pem, nil
}
