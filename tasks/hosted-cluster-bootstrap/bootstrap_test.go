package hostedclusterbootstrap

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
)

func TestEnsureTokenKeepsAHeldTokenAndReplacesAGoneOne(t *testing.T) {
	ctx := context.Background()
	hosted := fake.NewClientset()
	token, made, err := EnsureToken(ctx, hosted, "")
	if err != nil || !made {
		t.Fatalf("first token: %q made=%v err=%v", token, made, err)
	}
	id, secret, ok := strings.Cut(token, ".")
	if !ok || len(id) != 6 || len(secret) != 16 {
		t.Fatalf("token %q is not <6>.<16>", token)
	}
	s, err := hosted.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeBootstrapToken || string(s.Data["token-secret"]) != secret ||
		string(s.Data["usage-bootstrap-authentication"]) != "true" || string(s.Data["auth-extra-groups"]) != WorkerGroup {
		t.Fatalf("hosted token Secret: %v %v", s.Type, s.Data)
	}
	if _, ok := s.Data["expiration"]; ok {
		t.Fatal("the pool's token must not expire")
	}

	again, made, err := EnsureToken(ctx, hosted, token)
	if err != nil || made || again != token {
		t.Fatalf("held token: got %q made=%v err=%v, want %q kept", again, made, err, token)
	}
	// A token whose secret differs (a tampered Secret) is replaced.
	other, made, err := EnsureToken(ctx, hosted, id+".0000000000000000")
	if err != nil || !made || other == token {
		t.Fatalf("mismatched token: got %q made=%v err=%v", other, made, err)
	}
	if err := hosted.CoreV1().Secrets("kube-system").Delete(ctx, "bootstrap-token-"+id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh, made, err := EnsureToken(ctx, hosted, token)
	if err != nil || !made || fresh == token {
		t.Fatalf("deleted token: got %q made=%v err=%v", fresh, made, err)
	}
}

func TestEnsureBindingsRepairs(t *testing.T) {
	ctx := context.Background()
	// One binding exists with a wrong roleRef, another with a wrong subject.
	hosted := fake.NewClientset(
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubelet-bootstrap"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-bootstrap"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:authenticated"}}},
	)
	for range 2 {
		if err := EnsureBindings(ctx, hosted); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range Bindings {
		got, err := hosted.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.RoleRef.Name != want.Role || len(got.Subjects) != 1 || got.Subjects[0].Name != want.Group || got.Subjects[0].Kind != rbacv1.GroupKind {
			t.Errorf("%s: roleRef %s subjects %v, want %s bound to group %s", name, got.RoleRef.Name, got.Subjects, want.Role, want.Group)
		}
	}
}

func TestUserData(t *testing.T) {
	w := Worker{Server: "https://10.96.0.10:6443", CA: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), Token: "abcdef.0123456789abcdef"}
	ud, err := UserData(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#!/bin/sh\n",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\nEND\n",
		`server: "https://10.96.0.10:6443"`,
		`token: "abcdef.0123456789abcdef"`,
		"> /etc/kubernetes/bootstrap-kubelet.conf",
	} {
		if !strings.Contains(ud, want) {
			t.Errorf("user-data lacks %q:\n%s", want, ud)
		}
	}
	for _, not := range []string{"config.json", "net-conf.json", "clusterDNS", "certs.d"} {
		if strings.Contains(ud, not) {
			t.Errorf("user-data of a worker given nothing else writes %s", not)
		}
	}
	pull := `{"auths":{"registry.example":{"auth":"dXNlcjpwYXNz"}}}`
	w.PullSecret = []byte(pull + "\n")
	w.ClusterCIDR, w.ServiceCIDR = "10.132.0.0/14", "172.31.0.0/16"
	w.Registries = []Registry{{Name: "10.96.0.11:5000"}, {Name: "127.0.0.1:5000", Endpoint: "10.96.0.11:5000"}}
	if ud, err = UserData(w); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"cat > /var/lib/kubelet/config.json <<'END'\n" + pull + "\nEND\n",
		"clusterDNS: [172.31.0.10]\nclusterDomain: cluster.local\n",
		`{"Network": "10.132.0.0/14", "EnableNFTables": true, "Backend": {"Type": "vxlan", "Port": 9880}}`,
		"cat > '/etc/containerd/certs.d/10.96.0.11:5000/hosts.toml' <<'END'\nserver = \"http://10.96.0.11:5000\"\n[host.\"http://10.96.0.11:5000\"]\n",
		"cat > '/etc/containerd/certs.d/127.0.0.1:5000/hosts.toml' <<'END'\nserver = \"http://10.96.0.11:5000\"\n[host.\"http://10.96.0.11:5000\"]\n",
	} {
		if !strings.Contains(ud, want) {
			t.Errorf("user-data lacks %q:\n%s", want, ud)
		}
	}
	for _, bad := range []Worker{
		{ServiceCIDR: "172.31.0.0/29"}, {ServiceCIDR: "nope"}, {ClusterCIDR: "10.132.0.0"},
		{Registries: []Registry{{Name: "evil'; rm -rf /"}}}, {Registries: []Registry{{Name: "host/path"}}},
		{Registries: []Registry{{Name: "ok:5000", Endpoint: "$(reboot)"}}},
	} {
		if _, err := UserData(bad); err == nil {
			t.Errorf("UserData(%+v) took it", bad)
		}
	}
}

func TestClusterDNS(t *testing.T) {
	for cidr, want := range map[string]string{"172.31.0.0/16": "172.31.0.10", "10.96.0.0/12": "10.96.0.10", "10.96.5.7/12": "10.96.0.10"} {
		if got, err := ClusterDNS(cidr); err != nil || got.String() != want {
			t.Errorf("ClusterDNS(%s) = %v, %v; want %s", cidr, got, err, want)
		}
	}
}

// TestDNSObjects: kubeadm's CoreDNS, its Service at the address the
// kubelets name, the image given, forwarding what is not the cluster's to
// the worker's resolver.
func TestDNSObjects(t *testing.T) {
	addr, err := ClusterDNS("172.31.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range DNSObjects("reg/coredns@sha256:1", addr) {
		switch o := o.(type) {
		case *corev1.Service:
			kinds["Service"] = o.Name == DNSService && o.Namespace == "kube-system" && o.Spec.ClusterIP == "172.31.0.10"
		case *appsv1.Deployment:
			c := o.Spec.Template.Spec.Containers[0]
			kinds["Deployment"] = c.Image == "reg/coredns@sha256:1" && o.Spec.Template.Spec.DNSPolicy == corev1.DNSDefault &&
				o.Spec.Template.Spec.ServiceAccountName == "coredns"
		case *corev1.ConfigMap:
			kinds["ConfigMap"] = strings.Contains(o.Data["Corefile"], "kubernetes cluster.local in-addr.arpa ip6.arpa") &&
				strings.Contains(o.Data["Corefile"], "forward . /etc/resolv.conf")
		case *rbacv1.ClusterRoleBinding:
			kinds["ClusterRoleBinding"] = o.RoleRef.Name == "system:coredns" && o.Subjects[0].Name == "coredns"
		}
	}
	for _, k := range []string{"Service", "Deployment", "ConfigMap", "ClusterRoleBinding"} {
		if !kinds[k] {
			t.Errorf("%s missing or not as wanted", k)
		}
	}
}

// TestRouterObjects: the default ingress as OpenShift publishes it with
// the NodePort strategy - the router's NodePort Service with ports http
// and https reaching the router's container ports, the default
// IngressClass, the router serving the domain given.
func TestRouterObjects(t *testing.T) {
	kinds := map[string]bool{}
	var selector, podLabels map[string]string
	for _, o := range RouterObjects("reg/router@sha256:1", "apps.demo.example.com", 2) {
		switch o := o.(type) {
		case *corev1.Service:
			selector = o.Spec.Selector
			ports := map[string]string{}
			for _, p := range o.Spec.Ports {
				ports[p.Name] = fmt.Sprintf("%d->%s", p.Port, p.TargetPort.String())
			}
			kinds["Service"] = o.Name == hc.RouterService && o.Namespace == hc.RouterNamespace && o.Spec.Type == corev1.ServiceTypeNodePort &&
				ports[hc.RouterHTTPPortName] == "80->http" && ports[hc.RouterHTTPSPortName] == "443->https"
		case *appsv1.Deployment:
			podLabels = o.Spec.Template.Labels
			c := o.Spec.Template.Spec.Containers[0]
			named := map[string]int32{}
			for _, p := range c.Ports {
				named[p.Name] = p.ContainerPort
			}
			if v, err := podsecurity.Violations(&o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec); err != nil || len(v) > 0 {
				t.Errorf("the router's Pods break Pod Security restricted: %v %v", v, err)
			}
			kinds["Deployment"] = o.Name == hc.RouterDeployment && c.Image == "reg/router@sha256:1" &&
				slices.Contains(c.Args, "--domain=apps.demo.example.com") &&
				named["http"] == hc.RouterHTTPPort && named["https"] == hc.RouterHTTPSPort && *o.Spec.Replicas == 2
		case *networkingv1.IngressClass:
			kinds["IngressClass"] = o.Name == hc.IngressClass && o.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
		}
	}
	for _, k := range []string{"Service", "Deployment", "IngressClass"} {
		if !kinds[k] {
			t.Errorf("%s missing or not as wanted", k)
		}
	}
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		t.Errorf("the Service's selector %v does not select the router's Pods %v", selector, podLabels)
	}
}

func TestKonnectivityObjects(t *testing.T) {
	a := Agent{Image: "reg/konnectivity-agent@sha256:1", Server: net.ParseIP("10.96.7.7"), CA: []byte("ca"), Cert: []byte("crt"), Key: []byte("key")}
	var secret *corev1.Secret
	var ds *appsv1.DaemonSet
	for _, o := range KonnectivityObjects(a) {
		switch o := o.(type) {
		case *corev1.Secret:
			secret = o
		case *appsv1.DaemonSet:
			ds = o
		}
	}
	if secret == nil || ds == nil {
		t.Fatal("no Secret or no DaemonSet")
	}
	if secret.Namespace != metav1.NamespaceSystem || string(secret.Data["ca.crt"]) != "ca" || string(secret.Data[corev1.TLSPrivateKeyKey]) != "key" {
		t.Errorf("secret %s/%s %v", secret.Namespace, secret.Name, secret.Data)
	}
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	args := strings.Join(c.Command, " ")
	for _, want := range []string{"--proxy-server-host=10.96.7.7", "--proxy-server-port=8091", "--agent-identifiers=ipv4=$(HOST_IP)", "--ca-cert=", "--agent-key="} {
		if !strings.Contains(args, want) {
			t.Errorf("agent lacks %s: %s", want, args)
		}
	}
	if !spec.HostNetwork || len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("the agent must run on every node's network: hostNetwork %v, tolerations %v", spec.HostNetwork, spec.Tolerations)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the agent needs no API credentials")
	}
	if c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged || c.SecurityContext.RunAsNonRoot == nil && spec.SecurityContext.RunAsNonRoot == nil {
		t.Error("the agent runs privileged or as root")
	}
	if spec.Volumes[0].Secret == nil || spec.Volumes[0].Secret.SecretName != secret.Name {
		t.Errorf("the agent mounts %v, not its Secret", spec.Volumes)
	}
}
