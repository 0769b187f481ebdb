package step

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// copySelf copies the tekvirt-step binary to a path, so that a later step
// running another image (a containerDisk pulled by the node, which has no
// program of its own) can run it from a shared volume.
func copySelf() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "copy-self",
		Short: "Copy this program to a path (for a step whose image has none)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			in, err := os.Open(self)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
			if err != nil {
				return fmt.Errorf("copying tekvirt-step: %w", err)
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return fmt.Errorf("copying tekvirt-step to %s: %w", to, err)
			}
			return out.Close()
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "where to copy it")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}
