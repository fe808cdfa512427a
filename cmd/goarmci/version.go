package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/goarmci/goarmci/internal/config"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print goarmci's module version, VCS revision, Go version and platform",
		Long: `version prints the module version of this goarmci ("(devel)" when built in its source
tree), the VCS revision and commit time it was built from (with "modified" when the checkout had
uncommitted changes; none under go run), the Go version and GOOS/GOARCH. goarmci --version
prints the same line.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("version: takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := config.BuildInfo()
			if asJSON {
				out, err := json.MarshalIndent(b, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(out))
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), b.String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the fields as a JSON object")
	return cmd
}
