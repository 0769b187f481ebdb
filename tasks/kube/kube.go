package kube

import (
	"context"
	"fmt"
	"os"

	templatev1 "github.com/openshift/api/template/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/trust"
)

// NamespaceEnv holds the TaskRun's namespace, from the downward API.
const NamespaceEnv = "TASKRUN_NAMESPACE"

// Scheme knows the core, KubeVirt, CDI and OpenShift Template types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, cdiv1.AddToScheme, templatev1.Install} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Client connects with the step's service account.
func Client() (client.WithWatch, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("loading in-cluster config: %w", err)
	}
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating the API client: %w", err)
	}
	return c, nil
}

// Namespace is ns, or the TaskRun's namespace when ns is empty.
func Namespace(ns string) string {
	if ns != "" {
		return ns
	}
	return os.Getenv(NamespaceEnv)
}

// TekvirtCA is the PEM bundle that verifies tekvirt's serving certificates
// (upload proxy, node handlers), which the operator publishes for every
// authenticated user.
func TekvirtCA(ctx context.Context, c client.Reader) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: trust.Namespace, Name: trust.CABundleConfigMap}
	if err := c.Get(ctx, key, cm); err != nil {
		return nil, fmt.Errorf("reading tekvirt's CA bundle (ConfigMap %s): %w", key, err)
	}
	if cm.Data[trust.CABundleKey] == "" {
		return nil, fmt.Errorf("ConfigMap %s has no %s", key, trust.CABundleKey)
	}
	return []byte(cm.Data[trust.CABundleKey]), nil
}

// PodOwner is the step's Pod as an owner reference, from the downward API
// variables POD_NAME and POD_UID the tasks set; Name or UID is empty when
// the task does not set them.
func PodOwner(getenv func(string) string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: getenv("POD_NAME"), UID: types.UID(getenv("POD_UID"))}
}
