package cluster

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
)

// writeKubeconfig writes a kubeconfig for the client certificate pki/<cert>
// with the CA and credentials embedded, so the file can be copied around.
func (c *Cluster) writeKubeconfig(path, cert, server string) error {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(c.pkiDir(), name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	crt, err := read(cert + ".crt")
	if err != nil {
		return err
	}
	key, err := read(cert + ".key")
	if err != nil {
		return err
	}
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tekvirt
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: tekvirt
  context:
    cluster: tekvirt
    user: %s
current-context: tekvirt
`, server, ca, cert, crt, key, cert)
	return writeIfChanged(path, []byte(content), 0o600)
}
