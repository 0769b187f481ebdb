package cloudinit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "kubevirt.io/api/core/v1"
)

// NoCloud is the content of a seed.
type NoCloud struct {
	UserData    string
	MetaData    string
	NetworkData string
}

// FromVolume builds the seed of volume i of vmi, which must be a
// cloudInitNoCloud volume, with publicKeys (the accessCredentials of the
// noCloud propagation) in its meta-data, where cloud-init gives them to
// the image's default user. Secret references are not supported yet and
// are reported by field name.
func FromVolume(vmi *v1.VirtualMachineInstance, i int, publicKeys []string) (*NoCloud, error) {
	field := fmt.Sprintf("spec.volumes[%d].cloudInitNoCloud", i)
	src := vmi.Spec.Volumes[i].CloudInitNoCloud
	if src == nil {
		return nil, fmt.Errorf("spec.volumes[%d] is not a cloudInitNoCloud volume", i)
	}
	if src.UserDataSecretRef != nil {
		return nil, fmt.Errorf("%s.secretRef is not supported; give userData or userDataBase64", field)
	}
	if src.NetworkDataSecretRef != nil {
		return nil, fmt.Errorf("%s.networkDataSecretRef is not supported; give networkData or networkDataBase64", field)
	}
	user, err := pick(field+".userDataBase64", src.UserData, src.UserDataBase64)
	if err != nil {
		return nil, err
	}
	network, err := pick(field+".networkDataBase64", src.NetworkData, src.NetworkDataBase64)
	if err != nil {
		return nil, err
	}
	host := vmi.Name
	if vmi.Spec.Hostname != "" {
		host = vmi.Spec.Hostname
	}
	meta := fmt.Sprintf("instance-id: %s.%s\nlocal-hostname: %s\n", vmi.Name, vmi.Namespace, host)
	if len(publicKeys) > 0 {
		meta += "public-keys:\n"
		for n, k := range publicKeys {
			// A JSON string is a YAML double-quoted scalar: a key's
			// options may hold quotes and colons.
			q, _ := json.Marshal(k)
			meta += fmt.Sprintf("  \"%d\": %s\n", n, q)
		}
	}
	return &NoCloud{UserData: user, MetaData: meta, NetworkData: network}, nil
}

func pick(field, plain, b64 string) (string, error) {
	if b64 == "" {
		return plain, nil
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%s is not valid base64: %w", field, err)
	}
	return string(data), nil
}

// seedSize is the FAT image size; a seed holds a few kilobytes.
const seedSizeKiB = "2048"

// WriteImage writes the seed as a FAT image labelled CIDATA at path, with
// dosfstools and mtools (no mount needed).
func (n *NoCloud) WriteImage(ctx context.Context, path string) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".seed-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	files := []string{"user-data", "meta-data"}
	content := map[string]string{"user-data": n.UserData, "meta-data": n.MetaData}
	if n.NetworkData != "" {
		files = append(files, "network-config")
		content["network-config"] = n.NetworkData
	}
	args := []string{"-i", path + ".tmp"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.WriteFile(p, []byte(content[f]), 0o644); err != nil {
			return err
		}
		args = append(args, p)
	}
	_ = os.Remove(path + ".tmp")
	steps := [][]string{
		{"mkfs.vfat", "-C", "-n", "CIDATA", path + ".tmp", seedSizeKiB},
		append([]string{"mcopy"}, append(args, "::")...),
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("writing cloud-init seed: %s: %w: %s", strings.Join(s, " "), err, strings.TrimSpace(out.String()))
		}
	}
	return os.Rename(path+".tmp", path)
}
