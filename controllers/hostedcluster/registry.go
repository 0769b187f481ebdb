package hostedcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// +kubebuilder:rbac:groups="",namespace=kube-public,resources=configmaps,resourceNames=local-registry-hosting,verbs=get

// The ConfigMap in which a cluster announces its local registry, as
// KEP-1755 defines it (kind and tekvirt's testbed write it).
const (
	LocalRegistryNamespace = "kube-public"
	LocalRegistryConfigMap = "local-registry-hosting"
	localRegistryKey       = "localRegistryHosting.v1"
)

// localRegistryHosting is KEP-1755's localRegistryHosting.v1.
type localRegistryHosting struct {
	Host                   string `json:"host"`
	HostFromClusterNetwork string `json:"hostFromClusterNetwork"`
}

// LocalRegistry is the local registry a cluster announces in KEP-1755's
// ConfigMap (data as it holds it): where the cluster network reaches it
// (hostFromClusterNetwork, else host), and the name images of it carry
// from the host machine (host); "" when it names none.
func LocalRegistry(data map[string]string) (clusterAddr, host string, err error) {
	raw, ok := data[localRegistryKey]
	if !ok {
		return "", "", nil
	}
	var h localRegistryHosting
	if err := yaml.Unmarshal([]byte(raw), &h); err != nil {
		return "", "", fmt.Errorf("%s/%s %s: %w", LocalRegistryNamespace, LocalRegistryConfigMap, localRegistryKey, err)
	}
	if h.HostFromClusterNetwork != "" {
		return h.HostFromClusterNetwork, h.Host, nil
	}
	return h.Host, h.Host, nil
}

// localRegistry reads the infrastructure's local registry (LocalRegistry),
// the one hosted workers pull over plain HTTP; "" when it announces none.
func (r *Reconciler) localRegistry(ctx context.Context) (clusterAddr, host string, err error) {
	cm := &corev1.ConfigMap{}
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: LocalRegistryNamespace, Name: LocalRegistryConfigMap}, cm)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading %s/%s: %w", LocalRegistryNamespace, LocalRegistryConfigMap, err)
	}
	return LocalRegistry(cm.Data)
}
