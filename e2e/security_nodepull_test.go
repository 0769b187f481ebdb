package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
	"github.com/tekvirt/tekvirt/e2e/registry"
)

// pushPrivateDisk pushes the guest containerDisk on top of the pause image
// (so a Pod of it runs) to the registry's private repository repo and, the
// same image, to an open one; it returns both references.
func pushPrivateDisk(t *testing.T, f *framework.Framework, repo string) (private, open string) {
	t.Helper()
	pull := func(ref string) []mutate.Addendum {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(r)
		if err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		var out []mutate.Addendum
		for _, l := range layers {
			out = append(out, mutate.Addendum{Layer: l})
		}
		return out
	}
	pauseRef, err := name.ParseReference(cluster.RegistryAddr + "/tekvirt/tekvirt-pause:latest")
	if err != nil {
		t.Fatal(err)
	}
	pause, err := remote.Image(pauseRef)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(pause, pull(framework.GuestImage)...)
	if err != nil {
		t.Fatal(err)
	}
	user, pass, err := registry.Credentials(filepath.Join(f.Home, "data", "registry"))
	if err != nil {
		t.Fatal(err)
	}
	private = cluster.RegistryAddr + "/" + registry.PrivatePrefix + repo + ":v1"
	open = cluster.RegistryAddr + "/tekvirt/e2e-" + repo + ":v1"
	for ref, opts := range map[string][]remote.Option{private: {remote.WithAuth(&authn.Basic{Username: user, Password: pass})}, open: nil} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(r, img, opts...); err != nil {
			t.Fatalf("pushing %s: %v", ref, err)
		}
	}
	return private, open
}

// TestAttackNodePullOfAnotherTenantsImage: tenant B pulls a private image
// with its own pull secret, so every node has it cached. Tenant A, who
// has no credentials for it, asks for it as a DataVolume with
// `pullMethod: node`: the import step's image is pulled Always, so the
// kubelet asks the registry without credentials, is refused, and A's
// DataVolume never gets the disk. The same image in an open repository
// imports (the control that the node pull works at all).
func TestAttackNodePullOfAnotherTenantsImage(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	victim, attacker := f.Namespace(t), f.Namespace(t)
	ctx := context.Background()
	private, open := pushPrivateDisk(t, f, victim)

	user, pass, err := registry.Credentials(filepath.Join(f.Home, "data", "registry"))
	if err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, cluster.RegistryAddr, auth)}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for i, node := range f.Nodes(t) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: victim, Name: fmt.Sprintf("private-%d", i)},
			Spec: corev1.PodSpec{NodeName: node, ImagePullSecrets: []corev1.LocalObjectReference{{Name: secret.Name}},
				Containers: []corev1.Container{{Name: "c", Image: private}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, "the victim's private image pulled and running on "+node, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("phase %s, %+v", pod.Status.Phase, pod.Status.ContainerStatuses)
			}
			return nil
		})
	}

	dv := func(name, image string) *cdiv1.DataVolume {
		return &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: name},
			Spec: cdiv1.DataVolumeSpec{
				Source: &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: ptr("docker://" + image), PullMethod: ptr(cdiv1.RegistryPullNode)}},
				Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}}}}}
	}
	stolen, control := dv("stolen", private), dv("control", open)
	for _, d := range []*cdiv1.DataVolume{stolen, control} {
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 3*time.Minute, "the open image imported by node pull", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(control), control); err != nil {
			return err
		}
		if control.Status.Phase != cdiv1.Succeeded {
			return fmt.Errorf("phase %q: %s", control.Status.Phase, readyMessage(control))
		}
		return nil
	})
	// The private one: the registry refuses the kubelet, and the
	// DataVolume says so as CDI does.
	framework.Eventually(t, 2*time.Minute, "the attacker's DataVolume refused the private image", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(stolen), stolen); err != nil {
			return err
		}
		if stolen.Status.Phase == cdiv1.Succeeded {
			t.Fatalf("the attacker's DataVolume imported the victim's private image from the node's cache")
		}
		for _, cond := range stolen.Status.Conditions {
			if cond.Type == cdiv1.DataVolumeReady && cond.Reason == datavolume.ImagePullFailedReason {
				if !strings.Contains(cond.Message, "401 Unauthorized") || !strings.Contains(cond.Message, private) {
					return fmt.Errorf("pull failed, but not for want of credentials: %s", cond.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("phase %q, conditions %+v", stolen.Status.Phase, stolen.Status.Conditions)
	})
	t.Logf("attacker's DataVolume: phase %q, %s", stolen.Status.Phase, readyMessage(stolen))
}
