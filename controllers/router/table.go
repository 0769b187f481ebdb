package router

import (
	"cmp"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
)

// classAnnotation is the class annotation Ingresses carried before
// spec.ingressClassName.
const classAnnotation = "kubernetes.io/ingress.class"

// Backend is the Service port a route sends requests to.
type Backend struct {
	Namespace, Service string
	Port               networkingv1.ServiceBackendPort
}

// route is one path of one Ingress rule.
type route struct {
	path    string // normalized: no trailing "/"; "" for every path
	exact   bool
	rank    int // the Ingress's age: older first
	backend Backend
}

// matches says whether r serves path.
func (r route) matches(path string) bool {
	if r.exact {
		return path == r.path
	}
	// Prefix matching is by path element: /foo serves /foo and /foo/bar,
	// never /foobar.
	return r.path == "" || path == r.path || strings.HasPrefix(path, r.path+"/")
}

// Table maps a request's host and path to a Backend.
type Table struct {
	hosts    map[string][]route // by host: exact names and "*.<suffix>"
	anyHost  []route            // rules without a host
	fallback *Backend           // the oldest Ingress's defaultBackend
	tls      map[string]types.NamespacedName
	// Served are the Ingresses the table was made of.
	Served []types.NamespacedName
}

// Serves says whether the router serves ing: one of its class, or of no
// class (hc.IngressClass is the cluster's default).
func Serves(ing *networkingv1.Ingress) bool {
	if c := ing.Spec.IngressClassName; c != nil {
		return *c == hc.IngressClass
	}
	if c, ok := ing.Annotations[classAnnotation]; ok {
		return c == hc.IngressClass
	}
	return true
}

// NewTable is the routing table of the Ingresses among ings the router
// serves. Where two claim the same host and path, the older one wins, as
// OpenShift admits the older route; so does the certificate of a host.
func NewTable(ings []*networkingv1.Ingress) *Table {
	served := make([]*networkingv1.Ingress, 0, len(ings))
	for _, ing := range ings {
		if Serves(ing) && ing.DeletionTimestamp.IsZero() {
			served = append(served, ing)
		}
	}
	slices.SortFunc(served, func(a, b *networkingv1.Ingress) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	t := &Table{hosts: map[string][]route{}, tls: map[string]types.NamespacedName{}}
	for rank, ing := range served {
		t.Served = append(t.Served, types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name})
		t.add(rank, ing)
	}
	for _, routes := range t.hosts {
		sortRoutes(routes)
	}
	sortRoutes(t.anyHost)
	return t
}

// add puts the routes and certificates of ing, of rank, in t.
func (t *Table) add(rank int, ing *networkingv1.Ingress) {
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil && t.fallback == nil {
		t.fallback = &Backend{Namespace: ing.Namespace, Service: b.Service.Name, Port: b.Service.Port}
	}
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		if rule.Host != "" {
			hosts = append(hosts, strings.ToLower(rule.Host))
		}
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			if p.Backend.Service == nil {
				continue // a resource backend: nothing the router can send to
			}
			r := route{rank: rank, backend: Backend{Namespace: ing.Namespace, Service: p.Backend.Service.Name, Port: p.Backend.Service.Port}}
			if p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
				r.exact, r.path = true, p.Path
			} else {
				r.path = strings.TrimRight(p.Path, "/")
			}
			if rule.Host == "" {
				t.anyHost = append(t.anyHost, r)
			} else {
				h := strings.ToLower(rule.Host)
				t.hosts[h] = append(t.hosts[h], r)
			}
		}
	}
	t.addTLS(ing, hosts)
}

// addTLS puts the certificates of ing, whose rules name hosts, in t.
func (t *Table) addTLS(ing *networkingv1.Ingress, hosts []string) {
	for _, entry := range ing.Spec.TLS {
		if entry.SecretName == "" {
			continue
		}
		names := entry.Hosts
		if len(names) == 0 {
			names = hosts // no hosts: those of the Ingress's rules
		}
		for _, h := range names {
			h = strings.ToLower(h)
			if _, taken := t.tls[h]; !taken {
				t.tls[h] = types.NamespacedName{Namespace: ing.Namespace, Name: entry.SecretName}
			}
		}
	}
}

// sortRoutes orders routes as they are tried: the longest path first,
// Exact before Prefix on the same path, then the older Ingress.
func sortRoutes(routes []route) {
	slices.SortStableFunc(routes, func(a, b route) int {
		if c := cmp.Compare(len(b.path), len(a.path)); c != 0 {
			return c
		}
		if a.exact != b.exact {
			if a.exact {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.rank, b.rank)
	})
}

// Route is the backend of a request for host (without port) and path:
// the rules of that host, then of its wildcard (*.<parent>, which covers
// one label), then those without a host, then the default backend.
func (t *Table) Route(host, path string) (Backend, bool) {
	host = strings.ToLower(host)
	candidates := [][]route{t.hosts[host]}
	if w, ok := wildcard(host); ok {
		candidates = append(candidates, t.hosts[w])
	}
	candidates = append(candidates, t.anyHost)
	for _, routes := range candidates {
		for _, r := range routes {
			if r.matches(path) {
				return r.backend, true
			}
		}
	}
	if t.fallback != nil {
		return *t.fallback, true
	}
	return Backend{}, false
}

// Secret is the TLS Secret an Ingress names for host, exact or wildcard.
func (t *Table) Secret(host string) (types.NamespacedName, bool) {
	host = strings.ToLower(host)
	if s, ok := t.tls[host]; ok {
		return s, true
	}
	if w, ok := wildcard(host); ok {
		s, ok := t.tls[w]
		return s, ok
	}
	return types.NamespacedName{}, false
}

// wildcard is the wildcard name that covers host: *.<host less its first
// label>.
func wildcard(host string) (string, bool) {
	_, parent, ok := strings.Cut(host, ".")
	if !ok || parent == "" {
		return "", false
	}
	return "*." + parent, true
}
