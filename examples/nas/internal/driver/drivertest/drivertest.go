// Package drivertest checks the NAS kernel commands built on package driver: their exit
// statuses and the lines of their NPB-style reports.
package drivertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
)

// Run is a kernel command's entry point: driver.Run bound to the kernel.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Check runs the command with args and fails t unless it exits with status and its standard
// output holds every line of want (substrings). It returns both outputs.
func Check(t testing.TB, run Run, args []string, status int, want ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != status {
		t.Errorf("%v: exit status %d, want %d; stderr:\n%s", args, code, status, errb.String())
	}
	for _, l := range want {
		if !strings.Contains(out.String(), l) {
			t.Errorf("%v: the report has no %q:\n%s", args, l, out.String())
		}
	}
	return out.String(), errb.String()
}

// ClassS returns the lines of a verified class S report on ranks ranks, then more.
func ClassS(ranks int, more ...string) []string {
	return append([]string{" Class = S\n", " Ranks = " + strconv.Itoa(ranks) + "\n", " Verification = SUCCESSFUL\n"}, more...)
}

// Sim runs class S on n ranks of this process over the simulated fabric (-sim n) under
// testing/synctest (virtual time), and checks that it verifies with the lines of more.
func Sim(t *testing.T, run Run, n int, more ...string) {
	synctest.Test(t, func(t *testing.T) {
		Check(t, run, []string{"-class", "S", "-sim", fmt.Sprint(n)}, 0, ClassS(n, append(more, "simulated fabric")...)...)
	})
}

// BadClass checks that an unknown class is a usage error (status 2) named on standard error.
func BadClass(t testing.TB, run Run) {
	t.Helper()
	if _, errb := Check(t, run, []string{"-class", "Q"}, 2); !strings.Contains(errb, "unknown benchmark class") {
		t.Errorf("-class Q: stderr does not name the class:\n%s", errb)
	}
}
