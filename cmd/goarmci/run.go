package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/goarmci/goarmci/internal/config"
)

type runFlags struct {
	np             int
	timeout        time.Duration
	startupTimeout time.Duration
	transport      string
	grace          time.Duration
	progress       bool
}

// runFlagTakesValue reports whether a run flag consumes the next argument (for mpiStyleArgs).
func runFlagTakesValue(flag string) bool {
	switch flag {
	case "--np", "-n", "--timeout", "--startup-timeout", "--transport", "--grace":
		return true
	}
	return false
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run -np N [flags] PROGRAM|PACKAGE [args...]",
		Short: "start N local ranks of a program (or a Go package, built once)",
		Long: `run starts N ranks of PROGRAM on this host with a rendezvous service it hosts
(GOARMCI_RANK, GOARMCI_SIZE, GOARMCI_RDV, GOARMCI_JOBID are set for each rank). A Go package
(a directory such as ./examples/nas/cg, a .go file or an import path) is built once first.
Each output line is prefixed with its rank ("[3] ..."). SIGINT and SIGTERM are forwarded to
every rank. When a rank fails, the others are stopped and run exits with the failing rank's
exit code (128+signal for a rank killed by a signal, 124 when --timeout expires). run tells
the rendezvous how every rank ended, so the other ranks' errors say it ("rank 1 was killed by
signal 9 (SIGKILL) before Finalize"). When --timeout expires, every rank is sent SIGQUIT
first: a Go rank prints all its goroutines' stacks (each line prefixed with its rank) and
exits; ranks still running after --grace are killed.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("run: missing PROGRAM or PACKAGE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("np") {
				return usageError("run: missing -np N (the number of ranks), e.g. goarmci run -np 4 %s", args[0])
			}
			if f.np <= 0 {
				return usageError("run: -np must be a positive number of ranks, got %d", f.np)
			}
			if f.timeout < 0 || f.startupTimeout < 0 || f.grace < 0 {
				return usageError("run: durations must not be negative")
			}
			if f.transport != "" {
				var c config.Config
				if err := c.Set("GOARMCI_TRANSPORT", f.transport); err != nil {
					return usageError("run: --transport: %v", err)
				}
			}
			exe, cleanup, err := resolveTarget(args[0], cmd.ErrOrStderr())
			if err != nil {
				return &exitError{code: 1, err: fmt.Errorf("run: %w", err)}
			}
			defer cleanup()
			j := &job{
				np: f.np, exe: exe, args: args[1:], env: os.Environ(),
				transport: f.transport, startupTimeout: f.startupTimeout, timeout: f.timeout, grace: f.grace,
				stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), stdin: cmd.InOrStdin(),
				progress: f.progress,
			}
			code := j.run(context.Background())
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.SetInterspersed(false) // flags after PROGRAM belong to it
	fl.IntVarP(&f.np, "np", "n", 0, "number of ranks (also -np N, as mpirun)")
	fl.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit of the whole job; 0 = none (when hit: the ranks' goroutine stacks (SIGQUIT), exit code 124)")
	fl.DurationVar(&f.startupTimeout, "startup-timeout", 0, "sets GOARMCI_STARTUP_TIMEOUT (deadline of the ranks' start-up waits)")
	fl.StringVar(&f.transport, "transport", "", "shortcut for GOARMCI_TRANSPORT (auto, shm or tcp)")
	fl.DurationVar(&f.grace, "grace", 3*time.Second, "after stopping ranks with SIGTERM, wait this long before SIGKILL")
	fl.BoolVar(&f.progress, "progress", false, fmt.Sprintf("show ranks started and finished and the elapsed time on stderr (a bar on a terminal, else a line per event and every %v)", runHeartbeat))
	return cmd
}
