package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tekvirt/tekvirt/contracts/trust"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestClientDownloads: the docs' lines (docs/install.md) fetch the tekvirt CLI from the
// operator's downloads Service over HTTPS, verified with tekvirt's CA, and
// it runs; the arm64 build is there too, an arm64 ELF, and both match the
// server's SHA256SUMS.
func TestClientDownloads(t *testing.T) {
	f := framework.New(t)
	dir := t.TempDir()
	mustRunExample(t, f, docexample.Find(t, "install-cli-download"), dir, nil)
	cli := filepath.Join(dir, "tekvirt")
	if out, err := exec.Command(cli, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "Virtual machines on Kubernetes") {
		t.Errorf("the downloaded tekvirt --help: %v\n%s", err, out)
	}

	// The Service as a Pod reaches it, by name, verified with the CA.
	c := f.VMClient(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: trust.Namespace, Name: trust.CABundleConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[trust.CABundleKey])) {
		t.Fatal("the CA bundle holds no certificate")
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: ctrlconfig.DownloadsService}, svc); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
		ServerName: ctrlconfig.DownloadsService + "." + ctrlconfig.Namespace + ".svc"}}}
	get := func(p string) []byte {
		t.Helper()
		resp, err := hc.Get("https://" + net.JoinHostPort(svc.Spec.ClusterIP, "443") + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", p, resp.Status, err)
		}
		return body
	}
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(get("/SHA256SUMS"))), "\n") {
		if sum, name, ok := strings.Cut(line, "  "); ok {
			sums[name] = sum
		}
	}
	amd64, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	for arch, data := range map[string][]byte{"amd64": amd64, "arm64": get("/arm64/linux/tekvirt")} {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); sums[arch+"/linux/tekvirt"] != got {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %q", arch, got, sums[arch+"/linux/tekvirt"])
		}
		if m := elfMachine(t, data); m != map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch] {
			t.Errorf("%s/linux/tekvirt is an ELF for %s", arch, m)
		}
	}
	if index := string(get("/")); !strings.Contains(index, "/amd64/linux/tekvirt") || !strings.Contains(index, "/arm64/linux/tekvirt") {
		t.Errorf("index:\n%s", index)
	}
}

func elfMachine(t *testing.T, data []byte) elf.Machine {
	t.Helper()
	e, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not an ELF file: %v", err)
	}
	return e.Machine
}
