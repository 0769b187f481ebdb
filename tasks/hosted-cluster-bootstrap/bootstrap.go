package hostedclusterbootstrap

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math/big"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// FieldOwner is the task's server-side apply owner.
const FieldOwner = "hosted-cluster-bootstrap"

// WorkerGroup is the extra group of the workers' bootstrap token.
const WorkerGroup = "system:bootstrappers:tekvirt:worker"

// Params are the task's params.
type Params struct {
	Namespace string // the control-plane namespace
	// ClusterCIDR and ServiceCIDR are the hosted cluster's networks.
	ClusterCIDR, ServiceCIDR string
	// LocalRegistry is the infrastructure's local registry (KEP-1755's
	// hostFromClusterNetwork), which workers pull from over plain HTTP;
	// "" when it has none. LocalRegistryHost is the name images of it may
	// carry besides (KEP-1755's host), pulled from LocalRegistry.
	LocalRegistry, LocalRegistryHost string
	// CoreDNSImage is the cluster DNS's image; none is made when "".
	CoreDNSImage string
	// RouterImage is the default router's image, serving IngressDomain
	// with RouterReplicas; no default ingress is made when "".
	RouterImage, IngressDomain string
	RouterReplicas             int
	// KonnectivityAgentImage is the workers' Konnectivity agent's image,
	// the API server's way into the hosted cluster; no agents when "".
	KonnectivityAgentImage string
}

// Result names what the task made.
type Result struct{ Secret, TokenID string }

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{"workerBootstrapSecretName": r.Secret, "tokenID": r.TokenID}
}

// Bindings are the ClusterRoleBindings kubeadm makes for node bootstrap,
// by name: the ClusterRole and the group bound to it.
var Bindings = map[string]struct{ Role, Group string }{
	"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", "system:bootstrappers"},
	"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers"},
	"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	// kube-proxy runs on each worker with the node's credentials (as it
	// did before kubeadm gave it a ServiceAccount), so the nodes get its
	// role: Services, EndpointSlices and Nodes read.
	NodeProxierBinding: {"system:node-proxier", "system:nodes"},
}

// NodeProxierBinding binds kube-proxy's role to the workers.
const NodeProxierBinding = "tekvirt:node-proxier"

// Run makes the bootstrap token and bindings in the hosted cluster of the
// control plane in p.Namespace, and the worker bootstrap Secret there.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (Result, error) {
	if p.Namespace == "" {
		return Result{}, fmt.Errorf("controlPlaneNamespace is required")
	}
	admin, err := hostedcp.LocalConfig(ctx, c, p.Namespace)
	if err != nil {
		return Result{}, err
	}
	hosted, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return Result{}, err
	}
	if err := EnsureBindings(ctx, hosted); err != nil {
		return Result{}, err
	}
	if err := addOns(ctx, c, admin, p, out); err != nil {
		return Result{}, err
	}
	old := &corev1.Secret{}
	err = c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: hc.WorkerBootstrapSecret}, old)
	if err != nil && !apierrors.IsNotFound(err) {
		return Result{}, fmt.Errorf("reading Secret %s/%s: %w", p.Namespace, hc.WorkerBootstrapSecret, err)
	}
	token, made, err := EnsureToken(ctx, hosted, string(old.Data[hc.TokenKey]))
	if err != nil {
		return Result{}, err
	}
	userData, err := workerUserData(ctx, c, p, admin, token)
	if err != nil {
		return Result{}, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: hc.WorkerBootstrapSecret,
			Labels: map[string]string{hc.ComponentLabel: "worker-bootstrap"}},
		Data: map[string][]byte{
			hc.TokenKey:    []byte(token),
			hc.UserDataKey: []byte(userData),
		},
	}
	if err := hostedcp.Apply(ctx, c, FieldOwner, secret); err != nil {
		return Result{}, err
	}
	id, _, _ := strings.Cut(token, ".")
	verb := "kept"
	if made {
		verb = "made"
	}
	fmt.Fprintf(out, "bootstrap token %s %s; bindings %d; Secret %s/%s written (API server %s)\n", id, verb, len(Bindings), p.Namespace, hc.WorkerBootstrapSecret, admin.Host)
	return Result{Secret: hc.WorkerBootstrapSecret, TokenID: id}, nil
}

// addOns applies the hosted cluster's Konnectivity agents
// (EnsureKonnectivity), DNS (EnsureDNS) and default ingress
// (EnsureRouter) as its admin, those p names an image of; c reads the
// control plane.
func addOns(ctx context.Context, c client.Client, admin *rest.Config, p Params, out io.Writer) error {
	if p.CoreDNSImage == "" && p.RouterImage == "" && p.KonnectivityAgentImage == "" {
		return nil
	}
	hosted, err := client.New(admin, client.Options{Scheme: c.Scheme()})
	if err != nil {
		return err
	}
	if p.KonnectivityAgentImage != "" {
		agent, err := agentOf(ctx, c, p.Namespace, p.KonnectivityAgentImage)
		if err != nil {
			return err
		}
		if err := EnsureKonnectivity(ctx, hosted, agent); err != nil {
			return err
		}
		fmt.Fprintf(out, "Konnectivity agents %s/%s applied, dialing %s:%d (%s)\n", metav1.NamespaceSystem, hc.KonnectivityAgent, agent.Server, hc.KonnectivityAgentPort, p.KonnectivityAgentImage)
	}
	if p.CoreDNSImage != "" {
		if err := EnsureDNS(ctx, hosted, p.CoreDNSImage, p.ServiceCIDR); err != nil {
			return err
		}
		fmt.Fprintf(out, "cluster DNS %s/%s applied (%s)\n", dnsNamespace, DNSDeployment, p.CoreDNSImage)
	}
	if p.RouterImage != "" {
		if p.IngressDomain == "" {
			return fmt.Errorf("a router image needs the ingress domain")
		}
		if p.RouterReplicas < 1 {
			return fmt.Errorf("routerReplicas: %d; want at least 1", p.RouterReplicas)
		}
		if err := EnsureRouter(ctx, hosted, p.RouterImage, p.IngressDomain, int32(p.RouterReplicas)); err != nil {
			return err
		}
		fmt.Fprintf(out, "default ingress %s/%s applied for *.%s (%s, %d replicas)\n", hc.RouterNamespace, hc.RouterDeployment, p.IngressDomain, p.RouterImage, p.RouterReplicas)
	}
	return nil
}

// workerUserData is the workers' user-data for the hosted cluster admin
// reaches, joining with token, pulling with the cluster's pull secret and
// from p's local registry.
func workerUserData(ctx context.Context, c client.Client, p Params, admin *rest.Config, token string) (string, error) {
	pull := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: hc.PullSecret}, pull)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading Secret %s/%s: %w", p.Namespace, hc.PullSecret, err)
	}
	w := Worker{Server: admin.Host, CA: admin.CAData, Token: token, PullSecret: pull.Data[corev1.DockerConfigJsonKey],
		ClusterCIDR: p.ClusterCIDR, ServiceCIDR: p.ServiceCIDR}
	if p.LocalRegistry != "" {
		w.Registries = []Registry{{Name: p.LocalRegistry}}
		if p.LocalRegistryHost != "" && p.LocalRegistryHost != p.LocalRegistry {
			w.Registries = append(w.Registries, Registry{Name: p.LocalRegistryHost, Endpoint: p.LocalRegistry})
		}
	}
	return UserData(w)
}

// EnsureBindings creates kubeadm's bootstrap ClusterRoleBindings in the
// hosted cluster, or puts them back as they should be.
func EnsureBindings(ctx context.Context, hosted kubernetes.Interface) error {
	crbs := hosted.RbacV1().ClusterRoleBindings()
	for name, b := range Bindings {
		want := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.Role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: b.Group}},
		}
		got, err := crbs.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = crbs.Create(ctx, want, metav1.CreateOptions{})
		case err != nil:
		case got.RoleRef != want.RoleRef:
			// roleRef is immutable: replace the binding.
			if err = crbs.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
				_, err = crbs.Create(ctx, want, metav1.CreateOptions{})
			}
		default:
			got.Subjects = want.Subjects
			_, err = crbs.Update(ctx, got, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("hosted ClusterRoleBinding %s: %w", name, err)
		}
	}
	return nil
}

// EnsureToken keeps token ("<id>.<secret>") when the hosted cluster holds
// it, and otherwise makes a new one there; made says which.
func EnsureToken(ctx context.Context, hosted kubernetes.Interface, token string) (string, bool, error) {
	secrets := hosted.CoreV1().Secrets(metav1.NamespaceSystem)
	if id, secret, ok := strings.Cut(token, "."); ok {
		s, err := secrets.Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
		switch {
		case err == nil && string(s.Data["token-secret"]) == secret && s.Type == corev1.SecretTypeBootstrapToken:
			return token, false, nil
		case err != nil && !apierrors.IsNotFound(err):
			return "", false, fmt.Errorf("reading the hosted bootstrap token %s: %w", id, err)
		}
	}
	id, err := randomString(6)
	if err != nil {
		return "", false, err
	}
	secret, err := randomString(16)
	if err != nil {
		return "", false, err
	}
	_, err = secrets.Create(ctx, TokenSecret(id, secret), metav1.CreateOptions{})
	if err != nil {
		return "", false, fmt.Errorf("creating the hosted bootstrap token %s: %w", id, err)
	}
	return id + "." + secret, true, nil
}

// TokenSecret is the hosted cluster's bootstrap token Secret. It does not
// expire: it is the pool's join credential for as long as the cluster
// lives (delete it, and the task makes a new one on its next run).
func TokenSecret(id, secret string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id},
		Type:       corev1.SecretTypeBootstrapToken,
		Data: map[string][]byte{
			"token-id":                       []byte(id),
			"token-secret":                   []byte(secret),
			"usage-bootstrap-authentication": []byte("true"),
			"auth-extra-groups":              []byte(WorkerGroup),
			"description":                    []byte("tekvirt NodePool workers"),
		},
	}
}

// tokenAlphabet is what bootstrap token ids and secrets are made of.
const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func randomString(n int) (string, error) {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(tokenAlphabet))))
		if err != nil {
			return "", err
		}
		b[i] = tokenAlphabet[k.Int64()]
	}
	return string(b), nil
}
