package uploadtoken

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	uploadv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/upload/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/upload"
)

// issuer is a throwaway CA for client certificates.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &issuer{cert: cert, key: key}
}

func (i *issuer) client(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.cert, &key.PublicKey, i.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestAPI(t *testing.T) {
	frontProxy, other := newIssuer(t), newIssuer(t)
	pub, key, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1_800_000_000, 0)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk", UID: "pvc-uid-1"}}
	c := fake.NewClientBuilder().WithObjects(claim).Build()
	api := &API{Key: key, Client: c, AllowedNames: []string{"front-proxy-client"}, Log: logr.Discard(), Now: func() time.Time { return now }}
	srv := httptest.NewUnstartedServer(api.Handler())
	pool := x509.NewCertPool()
	pool.AddCert(frontProxy.cert)
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	post := func(cert *tls.Certificate, body string) (int, []byte) {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		}
		resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/ns/uploadtokenrequests", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	good := frontProxy.client(t, "front-proxy-client")
	body := `{"apiVersion":"upload.cdi.kubevirt.io/v1beta1","kind":"UploadTokenRequest","metadata":{"name":"t"},"spec":{"pvcName":"disk"}}`
	for name, tc := range map[string]struct {
		cert *tls.Certificate
		body string
		code int
		want string
	}{
		"no client certificate":   {nil, body, http.StatusUnauthorized, "client certificate of the front proxy is required"},
		"another CA's client":     {ptr(other.client(t, "front-proxy-client")), body, 0, ""},
		"front proxy, wrong name": {ptr(frontProxy.client(t, "kubelet")), body, http.StatusUnauthorized, "kubelet\\\" is not an allowed front proxy"},
		"no pvcName":              {&good, `{"spec":{}}`, http.StatusUnprocessableEntity, "spec.pvcName"},
		"no such PVC":             {&good, `{"spec":{"pvcName":"gone"}}`, http.StatusNotFound, "PersistentVolumeClaim ns/gone not found"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.code == 0 { // the TLS handshake itself refuses a certificate from another CA
				tr := srv.Client().Transport.(*http.Transport).Clone()
				tr.TLSClientConfig.Certificates = []tls.Certificate{*tc.cert}
				resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/apis", "application/json", nil)
				if err == nil {
					_ = resp.Body.Close()
					t.Fatal("a client certificate from another CA was accepted")
				}
				return
			}
			code, out := post(tc.cert, tc.body)
			if code != tc.code || !strings.Contains(string(out), tc.want) {
				t.Fatalf("got %d %s, want %d with %q", code, out, tc.code, tc.want)
			}
		})
	}
	code, out := post(&good, body)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	got := &uploadv1beta1.UploadTokenRequest{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	claims, err := upload.Verify(pub, got.Status.Token, now)
	if err != nil {
		t.Fatal(err)
	}
	want := upload.Claims{Operation: "Upload", Namespace: "ns", PVC: "disk", UID: "pvc-uid-1", IssuedAt: now.Unix(), Expires: now.Add(DefaultTTL).Unix()}
	if claims != want || got.Kind != "UploadTokenRequest" || got.Namespace != "ns" {
		t.Fatalf("claims %+v, object %+v", claims, got.TypeMeta)
	}
}

func ptr[T any](v T) *T { return &v }
