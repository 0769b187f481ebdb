package hostedclusterpki

import (
	"bytes"
	"regexp"
	"slices"
	"testing"
	"time"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/contracts/pki"
)

func TestPlanMakesThenKeeps(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	first, made, err := Plan(nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != len(identities)+1 {
		t.Errorf("made %v from nothing", made)
	}
	ca, _ := pki.Parse(first[hc.Cert(hc.CAKey)], first[hc.Key(hc.CAKey)])
	etcdCA, _ := pki.Parse(first[hc.Cert(hc.EtcdCAKey)], first[hc.Key(hc.EtcdCAKey)])
	admin, err := pki.Parse(first[hc.Cert(hc.AdminClient)], first[hc.Key(hc.AdminClient)])
	if err != nil {
		t.Fatal(err)
	}
	if admin.Cert.Subject.CommonName != "system:admin" || !slices.Equal(admin.Cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject %v", admin.Cert.Subject)
	}
	if admin.Cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Error("admin is not signed by the cluster CA")
	}
	etcdClient, _ := pki.Parse(first[hc.Cert(hc.EtcdClient)], first[hc.Key(hc.EtcdClient)])
	if etcdClient.Cert.CheckSignatureFrom(etcdCA.Cert) != nil || etcdClient.Cert.CheckSignatureFrom(ca.Cert) == nil {
		t.Error("the etcd client must be signed by the etcd CA only")
	}
	// etcd checks a client certificate's addresses against the address the
	// peer dials from (its Pod's): the peer certificate names none.
	peer, _ := pki.Parse(first[hc.Cert(hc.EtcdPeerClient)], first[hc.Key(hc.EtcdPeerClient)])
	if peer.Cert.CheckSignatureFrom(etcdCA.Cert) != nil || peer.Cert.Subject.CommonName != hc.EtcdPeerCommonName ||
		len(peer.Cert.IPAddresses)+len(peer.Cert.DNSNames) != 0 {
		t.Errorf("etcd peer client %v, IPs %v, DNS names %v", peer.Cert.Subject, peer.Cert.IPAddresses, peer.Cert.DNSNames)
	}
	// The agents' certificate opens the tunnel and nothing else: the hosted
	// API server, which trusts the cluster CA, does not take it.
	konnCA, _ := pki.Parse(first[hc.Cert(hc.KonnectivityCAKey)], first[hc.Key(hc.KonnectivityCAKey)])
	agent, _ := pki.Parse(first[hc.Cert(hc.KonnectivityAgentClient)], first[hc.Key(hc.KonnectivityAgentClient)])
	if agent.Cert.CheckSignatureFrom(konnCA.Cert) != nil || agent.Cert.CheckSignatureFrom(ca.Cert) == nil {
		t.Error("the konnectivity agent must be signed by the konnectivity CA only")
	}

	again, made, err := Plan(first, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 0 {
		t.Errorf("a second run made %v", made)
	}
	for k, v := range first {
		if !bytes.Equal(again[k], v) {
			t.Errorf("%s changed on a second run", k)
		}
	}

	// A lost scheduler key is made again, nothing else.
	broken := map[string][]byte{}
	for k, v := range first {
		broken[k] = v
	}
	delete(broken, hc.Key(hc.SchedulerClient))
	_, made, _ = Plan(broken, now)
	if !slices.Equal(made, []string{hc.SchedulerClient}) {
		t.Errorf("made %v after losing the scheduler key", made)
	}

	// A new cluster CA re-issues everything it signed, not the etcd side
	// nor the service-account key (which would invalidate tokens).
	delete(broken, hc.Key(hc.CAKey))
	fresh, made, _ := Plan(broken, now)
	want := []string{hc.CAKey, hc.AdminClient, hc.ControllerManagerClient, hc.SchedulerClient, hc.KubeletClient}
	if !slices.Equal(made, want) {
		t.Errorf("made %v after losing the CA key, want %v", made, want)
	}
	if !bytes.Equal(fresh[hc.Key(hc.ServiceAccountKey)], first[hc.Key(hc.ServiceAccountKey)]) {
		t.Error("the service-account key changed")
	}
}

func TestNewPassword(t *testing.T) {
	a, err := NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[2-9a-zA-Z]{5}-[2-9a-zA-Z]{5}-[2-9a-zA-Z]{5}-[2-9a-zA-Z]{5}$`).MatchString(a) {
		t.Errorf("password %q", a)
	}
	if b, _ := NewPassword(); a == b {
		t.Error("two passwords alike")
	}
}
