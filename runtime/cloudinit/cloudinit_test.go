package cloudinit

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"
)

func vmiWith(src v1.CloudInitNoCloudSource) *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns"},
		Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
			{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{}}},
			{Name: "cloudinit", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &src}},
		}},
	}
}

func TestFromVolume(t *testing.T) {
	nc, err := FromVolume(vmiWith(v1.CloudInitNoCloudSource{UserDataBase64: "I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogYQo=", NetworkData: "version: 2\n"}), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if nc.UserData != "#cloud-config\nhostname: a\n" || nc.NetworkData != "version: 2\n" || nc.MetaData != "instance-id: vm1.ns\nlocal-hostname: vm1\n" {
		t.Fatalf("seed = %+v", nc)
	}
	for _, tc := range []struct {
		src  v1.CloudInitNoCloudSource
		want string
	}{
		{v1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "s"}}, "spec.volumes[1].cloudInitNoCloud.secretRef"},
		{v1.CloudInitNoCloudSource{UserDataBase64: "%%%"}, "spec.volumes[1].cloudInitNoCloud.userDataBase64 is not valid base64"},
	} {
		if _, err := FromVolume(vmiWith(tc.src), 1, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
	if _, err := FromVolume(vmiWith(v1.CloudInitNoCloudSource{}), 0, nil); err == nil {
		t.Error("a containerDisk volume was taken for a seed")
	}
}

func TestWriteImageLabelAndFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seed.img")
	nc := &NoCloud{UserData: "#cloud-config\n", MetaData: "instance-id: x\n", NetworkData: "version: 2\n"}
	if err := nc.WriteImage(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	label, err := exec.Command("mlabel", "-s", "-i", path, "::").CombinedOutput()
	if err != nil || !strings.Contains(string(label), "CIDATA") {
		t.Fatalf("label: %s %v", label, err)
	}
	for name, want := range map[string]string{"user-data": nc.UserData, "meta-data": nc.MetaData, "network-config": nc.NetworkData} {
		got, err := exec.Command("mtype", "-i", path, "::"+name).Output()
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}

func TestFromVolumePublicKeys(t *testing.T) {
	keys := []string{"ssh-ed25519 AAAAC3Nz a@b", `command="echo \"hi\": x" ssh-rsa AAAAB3 c`}
	nc, err := FromVolume(vmiWith(v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}), 1, keys)
	if err != nil {
		t.Fatal(err)
	}
	// As cloud-init reads the meta-data: YAML, public-keys a map.
	var meta struct {
		InstanceID    string            `json:"instance-id"`
		LocalHostname string            `json:"local-hostname"`
		PublicKeys    map[string]string `json:"public-keys"`
	}
	if err := yaml.UnmarshalStrict([]byte(nc.MetaData), &meta); err != nil {
		t.Fatalf("meta-data %q: %v", nc.MetaData, err)
	}
	if meta.InstanceID != "vm1.ns" || len(meta.PublicKeys) != 2 || meta.PublicKeys["0"] != keys[0] || meta.PublicKeys["1"] != keys[1] {
		t.Errorf("meta-data %q read as %+v", nc.MetaData, meta)
	}
}
