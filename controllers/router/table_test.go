package router

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

type path struct {
	path, service string
	typ           networkingv1.PathType
}

func ingress(ns, name string, age time.Duration, host string, paths ...path) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).Add(-age))}}
	rule := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
	for _, p := range paths {
		rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{Path: p.path, PathType: ptr.To(p.typ),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: p.service,
				Port: networkingv1.ServiceBackendPort{Name: "http"}}}})
	}
	ing.Spec.Rules = []networkingv1.IngressRule{rule}
	return ing
}

func withClass(ing *networkingv1.Ingress, class string) *networkingv1.Ingress {
	ing.Spec.IngressClassName = &class
	return ing
}

func TestTableRoute(t *testing.T) {
	const prefix, exact, impl = networkingv1.PathTypePrefix, networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific
	fallback := ingress("d", "fallback", time.Hour, "")
	fallback.Spec.Rules = nil
	fallback.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "default", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	ings := []*networkingv1.Ingress{
		ingress("a", "web", 2*time.Hour, "web.apps.c.example.com", path{"/", "root", prefix}, path{"/api/", "api", prefix}, path{"/api/v1", "v1", exact}),
		// Younger, same host and path: loses to a/web.
		ingress("b", "thief", time.Minute, "web.apps.c.example.com", path{"/", "stolen", prefix}, path{"/static", "static", impl}),
		ingress("a", "wild", time.Hour, "*.apps.c.example.com", path{"/", "wild", prefix}),
		ingress("a", "anyhost", time.Hour, "", path{"/any", "any", prefix}),
		withClass(ingress("a", "nginx", 3*time.Hour, "other.example.com", path{"/", "nginx", prefix}), "nginx"),
		fallback,
	}
	deleted := ingress("a", "deleted", 4*time.Hour, "gone.example.com", path{"/", "gone", prefix})
	deleted.DeletionTimestamp = ptr.To(metav1.Now())
	ings = append(ings, deleted)
	table := NewTable(ings)
	for _, tc := range []struct {
		host, path string
		want       string // namespace/service; "" for no route
	}{
		{"web.apps.c.example.com", "/", "a/root"},
		{"WEB.apps.c.example.com", "/index.html", "a/root"},
		{"web.apps.c.example.com", "/api", "a/api"},
		{"web.apps.c.example.com", "/api/x", "a/api"},
		{"web.apps.c.example.com", "/apix", "a/root"},           // by element, not by string
		{"web.apps.c.example.com", "/api/v1", "a/v1"},           // Exact beats a shorter Prefix
		{"web.apps.c.example.com", "/api/v1/x", "a/api"},        // Exact is exact
		{"web.apps.c.example.com", "/static/a.css", "b/static"}, // the younger Ingress's other path
		{"shop.apps.c.example.com", "/", "a/wild"},
		{"a.shop.apps.c.example.com", "/", "d/default"}, // a wildcard covers one label
		{"anything.example.org", "/any/thing", "a/any"},
		{"other.example.com", "/", "d/default"}, // another class's Ingress is not served
		{"gone.example.com", "/", "d/default"},  // nor one being deleted
	} {
		b, ok := table.Route(tc.host, tc.path)
		got := ""
		if ok {
			got = b.Namespace + "/" + b.Service
		}
		if got != tc.want {
			t.Errorf("Route(%q, %q) = %q, want %q", tc.host, tc.path, got, tc.want)
		}
	}
	if len(table.Served) != 5 || table.Served[0] != (types.NamespacedName{Namespace: "a", Name: "web"}) {
		t.Errorf("Served = %v, want the 5 of the class or none, oldest first", table.Served)
	}
	if _, ok := NewTable(ings[:1]).Route("nowhere.example.com", "/"); ok {
		t.Error("a host no rule names has a route without a default backend")
	}
}

func TestTableSecret(t *testing.T) {
	old := ingress("a", "web", time.Hour, "web.apps.c.example.com", path{"/", "web", networkingv1.PathTypePrefix})
	old.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "web-tls"}} // no hosts: the rules'
	young := ingress("b", "other", time.Minute, "*.apps.c.example.com", path{"/", "w", networkingv1.PathTypePrefix})
	young.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.apps.c.example.com", "*.apps.c.example.com"}, SecretName: "wild-tls"}}
	annotated := ingress("c", "annotated", 2*time.Hour, "x.example.com", path{"/", "x", networkingv1.PathTypePrefix})
	annotated.Annotations = map[string]string{classAnnotation: "nginx"}
	annotated.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "x-tls"}}
	table := NewTable([]*networkingv1.Ingress{young, old, annotated})
	for host, want := range map[string]string{
		"web.apps.c.example.com":  "a/web-tls", // the older Ingress's
		"shop.apps.c.example.com": "b/wild-tls",
		"x.example.com":           "", // another class's
		"example.com":             "",
	} {
		s, ok := table.Secret(host)
		got := ""
		if ok {
			got = s.String()
		}
		if got != want {
			t.Errorf("Secret(%q) = %q, want %q", host, got, want)
		}
	}
}
