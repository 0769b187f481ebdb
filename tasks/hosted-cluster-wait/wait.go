package hostedclusterwait

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/tasks/hostedcp"
)

// Params are the task's params.
type Params struct {
	Namespace string
	Timeout   time.Duration
}

// Result is the hosted cluster's version.
type Result struct{ Version string }

// Map is the task's results.
func (r Result) Map() map[string]string { return map[string]string{"version": r.Version} }

// Deployments are the control-plane Deployments waited for.
var Deployments = []string{hc.APIServerDeployment, hc.ControllerManagerDeployment, hc.SchedulerDeployment}

// Available says whether d has rolled out: every replica updated and
// available for its latest generation, and how far it is.
func Available(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	done := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
	return done, fmt.Sprintf("%s %d/%d", d.Name, s.AvailableReplicas, want)
}

// Run waits for the control plane in p.Namespace.
func Run(ctx context.Context, c client.Client, p Params, out io.Writer) (Result, error) {
	if p.Namespace == "" {
		return Result{}, fmt.Errorf("controlPlaneNamespace is required")
	}
	ns := p.Namespace
	deadline := time.Now().Add(p.Timeout)
	err := hostedcp.Wait(ctx, out, "control plane", p.Timeout, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		all, parts := true, make([]string, 0, len(Deployments))
		for _, name := range Deployments {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
				return false, "", fmt.Errorf("reading Deployment %s/%s (run hosted-cluster-control-plane first): %w", ns, name, err)
			}
			ok, status := Available(d)
			all = all && ok
			parts = append(parts, status)
		}
		return all, strings.Join(parts, ", ") + " available", nil
	})
	if err != nil {
		return Result{}, err
	}
	admin, err := hostedcp.LocalConfig(ctx, c, ns)
	if err != nil {
		return Result{}, err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return Result{}, err
	}
	var version string
	err = hostedcp.Wait(ctx, out, "API server", time.Until(deadline), 2*time.Second, func(ctx context.Context) (bool, string, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, "not ready: " + firstLine(err.Error()), nil
		}
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			return false, "version: " + firstLine(err.Error()), nil
		}
		version = v.GitVersion
		return true, fmt.Sprintf("/readyz %s, version %s", strings.TrimSpace(string(body)), version), nil
	})
	if err != nil {
		return Result{}, err
	}
	if err := checkKubeadmin(ctx, c, ns, admin); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(out, "kubeadmin authenticates\n")
	return Result{Version: version}, nil
}

// checkKubeadmin asks the API server who the kubeadmin password is.
func checkKubeadmin(ctx context.Context, c client.Reader, ns string, admin *rest.Config) error {
	password, err := hostedcp.Password(ctx, c, ns)
	if err != nil {
		return err
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = password
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("the kubeadmin password does not authenticate: %w", err)
	}
	if u := review.Status.UserInfo.Username; u != hc.KubeadminUser {
		return fmt.Errorf("the kubeadmin password authenticates as %q, not %q", u, hc.KubeadminUser)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
