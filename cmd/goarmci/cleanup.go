package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/internal/config"
)

func newCleanupCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "remove the shared-memory files of goarmci jobs whose processes are gone",
		Long: `cleanup removes from the shared-memory directory (--dir, default GOARMCI_SHM_DIR, else
/dev/shm) every goarmci control file whose owner process has ended without closing it, of any
job, and prints each one removed. A running job's files are kept. Since the runtime removes its
file at the end of Init, only a process killed while starting can leave one behind.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("cleanup: takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				c, _, err := config.FromEnv()
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				dir = c.ShmDir
			}
			removed, err := shm.Sweep(dir)
			for _, p := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", p)
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if len(removed) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "nothing to remove in %s\n", dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", os.Getenv("GOARMCI_SHM_DIR"), "the shared-memory directory")
	return cmd
}
