package hostedclusteraccess

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// FieldOwner is the task's server-side apply owner.
const FieldOwner = "hosted-cluster-access"

// Params are the task's params.
type Params struct {
	Namespace        string // the control-plane namespace
	ClusterName      string
	ClusterNamespace string
	// ClusterUID, when set, makes the HostedCluster the Secrets' owner, so
	// they go with it.
	ClusterUID string
	// PullSecretName, when set, is the HostedCluster's pull secret in
	// ClusterNamespace, copied into the control-plane namespace.
	PullSecretName string
}

// Result names the access Secrets.
type Result struct{ Kubeconfig, Password, Server string }

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{"kubeconfigSecretName": r.Kubeconfig, "kubeadminPasswordSecretName": r.Password, "apiServerURL": r.Server}
}

// Run writes the access Secrets into p.ClusterNamespace.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (Result, error) {
	if p.Namespace == "" || p.ClusterName == "" || p.ClusterNamespace == "" {
		return Result{}, fmt.Errorf("controlPlaneNamespace, clusterName and clusterNamespace are required")
	}
	store, err := hostedcp.LoadPKI(ctx, c, p.Namespace)
	if err != nil {
		return Result{}, err
	}
	ca, err := store.Pair(hc.CAKey)
	if err != nil {
		return Result{}, err
	}
	admin, err := store.Pair(hc.AdminClient)
	if err != nil {
		return Result{}, err
	}
	password, err := hostedcp.Password(ctx, c, p.Namespace)
	if err != nil {
		return Result{}, err
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: hc.APIServerService}, svc); err != nil {
		return Result{}, fmt.Errorf("reading Service %s/%s (run hosted-cluster-control-plane first): %w", p.Namespace, hc.APIServerService, err)
	}
	server := hostedcp.APIServerURL(hc.PublishedAddress(svc))
	kc, err := hostedcp.Kubeconfig(p.ClusterName, server, ca.CertPEM, "admin", admin.CertPEM, admin.KeyPEM, "")
	if err != nil {
		return Result{}, err
	}
	res := Result{Kubeconfig: hc.AdminKubeconfigSecret(p.ClusterName), Password: hc.KubeadminPasswordSecretOf(p.ClusterName), Server: server}
	meta := func(name string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Namespace: p.ClusterNamespace, Name: name,
			Labels:      map[string]string{hc.ComponentLabel: "access"},
			Annotations: map[string]string{hc.ClusterAnnotation: p.ClusterNamespace + "/" + p.ClusterName}}
		if p.ClusterUID != "" {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "hypershift.openshift.io/v1beta1", Kind: "HostedCluster",
				Name: p.ClusterName, UID: types.UID(p.ClusterUID)}}
		}
		return m
	}
	err = hostedcp.Apply(ctx, c, FieldOwner,
		&corev1.Secret{ObjectMeta: meta(res.Kubeconfig), Data: map[string][]byte{hc.KubeconfigKey: kc}},
		&corev1.Secret{ObjectMeta: meta(res.Password), Data: map[string][]byte{hc.PasswordKey: []byte(password)}})
	if err != nil {
		return Result{}, err
	}
	if p.PullSecretName != "" {
		if err := copyPullSecret(ctx, c, p); err != nil {
			return Result{}, err
		}
		fmt.Fprintf(out, "pull secret %s/%s copied to %s/%s\n", p.ClusterNamespace, p.PullSecretName, p.Namespace, hc.PullSecret)
	}
	fmt.Fprintf(out, "Secrets %s/%s and %s/%s written; API server %s\n", p.ClusterNamespace, res.Kubeconfig, p.ClusterNamespace, res.Password, server)
	return res, nil
}

// copyPullSecret copies the HostedCluster's pull secret (a docker config
// JSON) into the control-plane namespace, for the workers.
func copyPullSecret(ctx context.Context, c client.Client, p Params) error {
	src := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.ClusterNamespace, Name: p.PullSecretName}, src); err != nil {
		return fmt.Errorf("reading the pull secret %s/%s (spec.pullSecret): %w", p.ClusterNamespace, p.PullSecretName, err)
	}
	data := src.Data[corev1.DockerConfigJsonKey]
	if !json.Valid(data) {
		return fmt.Errorf("pull secret %s/%s: key %s is not a docker config JSON", p.ClusterNamespace, p.PullSecretName, corev1.DockerConfigJsonKey)
	}
	return hostedcp.Apply(ctx, c, FieldOwner, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: hc.PullSecret, Labels: map[string]string{hc.ComponentLabel: "pull-secret"}},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	})
}
