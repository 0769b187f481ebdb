package importdisk

import (
	"github.com/spf13/cobra"

	"github.com/tekvirt/tekvirt/tasks/kube"
	"github.com/tekvirt/tekvirt/tasks/result"
)

// Command is the import-disk step.
func Command() *cobra.Command {
	var p Params
	cmd := &cobra.Command{
		Use:   "import-disk",
		Short: "Import a disk image into a volume as disk.img",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p.Namespace = kube.Namespace("")
			c, err := kube.Client()
			if err != nil {
				return err
			}
			if p.Blank {
				res, err := Blank(p, cmd.OutOrStdout())
				if err != nil {
					return err
				}
				return result.Write(res.Map())
			}
			if p.UploadAddr != "" {
				res, err := Upload(cmd.Context(), p, cmd.OutOrStdout())
				if err != nil {
					return err
				}
				return result.Write(res.Map())
			}
			src, err := Source(cmd.Context(), c, p)
			if err != nil {
				return &result.Failure{Err: err}
			}
			if p.DigestOnly {
				d, err := Digest(cmd.Context(), src)
				if err != nil {
					return err
				}
				return result.Write(map[string]string{"digest": d})
			}
			res, err := Run(cmd.Context(), src, p, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			return result.Write(res.Map())
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.URL, "url", "", "HTTP(S) URL of the image")
	f.StringVar(&p.Registry, "registry", "", "containerDisk image reference (docker:// prefix optional)")
	f.StringVar(&p.SecretName, "secret-name", "", "Secret with accessKeyId and secretKey")
	f.StringVar(&p.CertConfigMap, "cert-configmap", "", "ConfigMap with extra CA certificates")
	f.StringVar(&p.Checksum, "checksum", "", "expected digest, alg:hex (md5, sha1, sha256, sha512)")
	f.StringVar(&p.Size, "size", "", "virtual size wanted, e.g. 10Gi (default: the image's)")
	f.StringVar(&p.Capacity, "capacity", "", "size of the volume, e.g. 10Gi (a larger image fails)")
	f.BoolVar(&p.InsecureRegistry, "insecure-registry", false, "allow plain HTTP or unverified TLS to the registry")
	f.StringVar(&p.Dir, "dir", "", "the data workspace's path")
	f.StringVar(&p.CertDir, "cert-dir", "", "directory of extra CA certificate files (a mounted ConfigMap)")
	f.StringVar(&p.ProgressAddr, "progress-addr", "", "serve GET /progress on this address during the import (e.g. :8089)")
	f.StringVar(&p.UploadAddr, "upload-addr", "", "receive the image as an upload on this address (e.g. :8089) instead of fetching it")
	f.StringVar(&p.UploadPublicKey, "upload-public-key", "", "base64 Ed25519 public key that upload tokens are verified with")
	f.StringVar(&p.UploadClaim, "upload-claim", "", "name of the PVC upload tokens must be for")
	f.StringVar(&p.UploadClaimUID, "upload-claim-uid", "", "UID of that PVC, which upload tokens must name")
	f.BoolVar(&p.DigestOnly, "digest-only", false, "only read the registry image's manifest digest into the digest result; import nothing")
	f.StringVar(&p.ContainerDiskDir, "container-disk-dir", "", "import the first file under this directory of the step's own image (a containerDisk pulled by the node)")
	f.BoolVar(&p.Blank, "blank", false, "make an empty sparse disk of --size instead of importing")
	return cmd
}
