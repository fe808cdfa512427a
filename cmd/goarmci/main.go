// Command goarmci launches and inspects goarmci jobs:
//
//	goarmci run -np N [--timeout D] [--transport auto|shm|tcp] PROGRAM|PACKAGE [args...]
//	goarmci info
//
// See DESIGN §4 (launching) and §5 (configuration and introspection).
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
