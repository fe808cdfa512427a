// Command goarmci launches and inspects goarmci jobs:
//
//	goarmci run -np N [--timeout D] [--transport auto|shm|tcp] PROGRAM|PACKAGE [args...]
//	goarmci info
//	goarmci bench NAME [flags]
//	goarmci version (or goarmci --version)
//
// Plots of bench results are drawn by goarmci-plot, a separate command, so that goarmci's
// build does not include the plotting stack.
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
