package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/goarmci/goarmci/internal/config"
)

// exitError carries a process exit code out of a subcommand.
type exitError struct {
	code int
	err  error // printed unless nil
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError is a bad command line: exit code 2.
func usageError(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "goarmci",
		Short:         "launch and inspect goarmci (PGAS one-sided communication) jobs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, err: fmt.Errorf("%w\n%s", err, c.UsageString())}
	})
	root.Version = config.BuildInfo().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newRunCmd(), newInfoCmd(), newBenchCmd(), newVersionCmd(), newCleanupCmd())
	return root
}

// execute runs the command line args and returns the process exit code.
func execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(mpiStyleArgs(args))
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "goarmci: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "goarmci: %v\n", err)
	if strings.Contains(err.Error(), "unknown command") || strings.Contains(err.Error(), "unknown flag") {
		return 2
	}
	return 1
}

// mpiStyleArgs accepts mpirun's single-dash "-np N" for run's flags: it rewrites "-np" to
// "--np" among the flags before the program (never in the program's own arguments).
func mpiStyleArgs(args []string) []string {
	out := append([]string(nil), args...)
	if len(out) == 0 || out[0] != "run" {
		return out
	}
	for i := 1; i < len(out); i++ {
		a := out[i]
		switch {
		case a == "-np":
			out[i] = "--np"
			i++ // its value
		case strings.HasPrefix(a, "-np="):
			out[i] = "-" + a
		case a == "--":
			return out
		case strings.HasPrefix(a, "-"):
			if !strings.Contains(a, "=") && runFlagTakesValue(a) {
				i++
			}
		default:
			return out // the program: the rest are its arguments
		}
	}
	return out
}
